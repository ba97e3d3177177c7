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
  Nf4Weight q(w.shape(), w.dtype(), zeros({(total + 3) / 4}, DType::kU16));
  q.double_quant_ = double_quant;
  const int64_t n = q.numel(), blocks = blocks_of(n);

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

std::shared_ptr<const QuantizedWeight> Nf4Weight::to(Device device) const {
  auto q = std::make_shared<Nf4Weight>(*this);
  q->codes_ = core::to_device(codes_, device);
  if (double_quant_) {
    q->absmax_codes_ = core::to_device(*absmax_codes_, device);
    q->group_scales_ = core::to_device(*group_scales_, device);
  } else {
    q->absmax_ = core::to_device(*absmax_, device);
  }
  return q;
}

void Nf4Weight::dequantize_into(int64_t begin, int64_t end, DType dtype, void* out) const {
  check_range(begin, end);
  ops::nf4_dequantize_into(data(), device(), begin, end, dtype, out);
}

std::vector<StoredSpec> Nf4Weight::layout(int64_t numel, bool double_quant) {
  const int64_t blocks = blocks_of(numel);
  std::vector<StoredSpec> out{{"codes", DType::kU16, Shape{(numel + 3) / 4}}};
  if (double_quant) {
    out.push_back({"absmax_codes", DType::kU16, Shape{(blocks + 1) / 2}});
    out.push_back({"group_scales", DType::kF32, Shape{(blocks + kNf4ScaleGroup - 1) / kNf4ScaleGroup}});
  } else {
    out.push_back({"absmax", DType::kF32, Shape{blocks}});
  }
  return out;
}

std::vector<std::pair<std::string, Tensor>> Nf4Weight::stored() const {
  std::vector<std::pair<std::string, Tensor>> out{{"codes", codes_}};
  if (double_quant_) {
    out.emplace_back("absmax_codes", *absmax_codes_);
    out.emplace_back("group_scales", *group_scales_);
  } else {
    out.emplace_back("absmax", *absmax_);
  }
  return out;
}

Nf4Weight Nf4Weight::from_stored(const Shape& shape, DType dtype, bool double_quant, const std::vector<Tensor>& stored) {
  TRI_ASSERT(stored.size() == (double_quant ? 3u : 2u), "NF4: ", stored.size(), " stored tensors");
  Nf4Weight q(shape, dtype, stored[0]);
  q.double_quant_ = double_quant;
  if (double_quant) {
    q.absmax_codes_ = stored[1];
    q.group_scales_ = stored[2];
  } else {
    q.absmax_ = stored[1];
  }
  return q;
}

}  // namespace trident::quantization
