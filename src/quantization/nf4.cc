#include "quantization/nf4.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "kernels/cpu/nf4.h"
#include "ops/nf4.h"

namespace trident::quantization {
namespace {

int64_t blocks_of(int64_t n) { return (n + kNf4Block - 1) / kNf4Block; }

}  // namespace

Nf4Weight Nf4Weight::quantize(const Tensor& w, bool double_quant, const std::string& name) {
  TRI_CHECK(is_floating(w.dtype()), "NF4: '", name, "' is ", dtype_name(w.dtype()), ", not a floating dtype");
  const Tensor f = core::contiguous(core::cast(core::to_device(w, Device::cpu()), DType::kF32));
  const float* x = f.data_ptr<float>();
  const int64_t total = w.numel();
  Nf4Weight q(zeros({(total + 3) / 4}, DType::kU16));
  q.shape_ = w.shape();
  q.dtype_ = w.dtype();
  q.numel_ = w.numel();
  q.double_quant_ = double_quant;
  const int64_t n = q.numel_, blocks = blocks_of(n);

  std::vector<float> absmax(static_cast<size_t>(blocks), 0.0f);
  parallel_for(0, blocks, 64, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      float m = 0.0f;
      bool finite = true;
      for (int64_t i = b * kNf4Block; i < std::min(n, (b + 1) * kNf4Block); ++i) {
        finite = finite && std::isfinite(x[i]);
        m = std::max(m, std::fabs(x[i]));
      }
      absmax[static_cast<size_t>(b)] = finite ? m : NAN;
    }
  });
  for (int64_t b = 0; b < blocks; ++b) {
    if (std::isfinite(absmax[static_cast<size_t>(b)])) continue;
    for (int64_t i = b * kNf4Block; i < std::min(n, (b + 1) * kNf4Block); ++i)
      TRI_CHECK(std::isfinite(x[i]), "NF4: '", name, "' holds ", x[i], " at element ", i,
                ": only finite weights can be quantized");
  }
  if (double_quant) {
    const int64_t groups = (blocks + kNf4ScaleGroup - 1) / kNf4ScaleGroup;
    q.group_scales_ = empty({groups}, DType::kF32);
    q.absmax_codes_ = zeros({(blocks + 1) / 2}, DType::kU16);
    float* scale = q.group_scales_->data_ptr<float>();
    uint16_t* codes = q.absmax_codes_->data_ptr<uint16_t>();
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t b0 = g * kNf4ScaleGroup, b1 = std::min(blocks, b0 + kNf4ScaleGroup);
      float s = 0.0f;
      for (int64_t b = b0; b < b1; ++b) s = std::max(s, absmax[static_cast<size_t>(b)]);
      scale[g] = s;
      for (int64_t b = b0; b < b1; ++b) {
        const long c = s > 0.0f ? std::lrint(static_cast<double>(absmax[static_cast<size_t>(b)]) / s * 255.0) : 0;
        codes[b / 2] |= static_cast<uint16_t>(std::clamp<long>(c, 0, 255) << (8 * (b % 2)));
      }
    }
  } else {
    q.absmax_ = from_vector(absmax, {blocks});
  }
  // Each weight is coded against its block's own absmax (as bitsandbytes does) and decoded
  // with the block's stored scale.
  uint16_t* codes = q.codes_.data_ptr<uint16_t>();
  parallel_for(0, blocks, 64, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const double a = absmax[static_cast<size_t>(b)];
      for (int64_t i = b * kNf4Block; i < std::min(n, (b + 1) * kNf4Block); ++i)
        codes[i / 4] |= static_cast<uint16_t>(kernels::cpu::nf4_code(a > 0.0 ? x[i] / a : 0.0) << (4 * (i % 4)));
    }
  });
  return q;
}

int64_t Nf4Weight::bytes() const {
  int64_t total = codes_.numel() * 2;
  if (double_quant_) total += absmax_codes_->numel() * 2 + group_scales_->numel() * 4;
  else total += absmax_->numel() * 4;
  return total;
}

int64_t Nf4Weight::bytes_for(int64_t numel, bool double_quant) {
  const int64_t blocks = blocks_of(numel);
  const int64_t codes = (numel + 3) / 4 * 2;  // u16, four codes each
  if (!double_quant) return codes + blocks * 4;
  return codes + (blocks + 1) / 2 * 2 + (blocks + kNf4ScaleGroup - 1) / kNf4ScaleGroup * 4;
}

Nf4Data Nf4Weight::data() const {
  Nf4Data d;
  d.codes = static_cast<const uint16_t*>(codes_.raw_data());
  if (double_quant_) {
    d.absmax_codes = static_cast<const uint16_t*>(absmax_codes_->raw_data());
    d.group_scales = static_cast<const float*>(group_scales_->raw_data());
  } else {
    d.absmax = static_cast<const float*>(absmax_->raw_data());
  }
  return d;
}

Nf4Weight Nf4Weight::to(Device device) const {
  Nf4Weight q = *this;
  q.codes_ = core::to_device(codes_, device);
  if (double_quant_) {
    q.absmax_codes_ = core::to_device(*absmax_codes_, device);
    q.group_scales_ = core::to_device(*group_scales_, device);
  } else {
    q.absmax_ = core::to_device(*absmax_, device);
  }
  return q;
}

Tensor Nf4Weight::dequantize(int64_t begin, int64_t end, DType dtype) const {
  TRI_CHECK(0 <= begin && begin <= end && end <= numel_, "NF4: elements [", begin, ", ", end, ") of ", numel_);
  return ops::nf4_dequantize(data(), device(), begin, end, dtype);
}

Tensor Nf4Weight::dequantize() const {
  Tensor out = empty(shape_, dtype_, device());
  ops::nf4_dequantize_into(data(), device(), 0, numel_, dtype_, out.raw_data());
  return out;
}

}  // namespace trident::quantization
