#include "quantization/w8a8_weight.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "core/check.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "kernels/cpu/int8_gemm.h"
#include "kernels/cpu/int8_quantize.h"
#include "kernels/cpu/onednn_int8_gemm.h"
#include "ops/dispatch.h"
#include "quantization/quantized_matmul.h"

namespace trident::quantization {

using kernels::cpu::Int8PackedWeights;
using kernels::cpu::OnednnInt8Weights;

struct W8a8Weight::State {
  Int8PackedWeights packed;
  std::vector<float> scales;  // per row, as stored
  std::once_flag onednn_once;
  std::unique_ptr<OnednnInt8Weights> onednn;  // made on the first product of many rows

  State(const int8_t* codes, int64_t out, int64_t in, int64_t ld, const float* s)
      : packed(codes, out, in, ld, s), scales(s, s + out) {}
  const OnednnInt8Weights& onednn_weights() {
    std::call_once(onednn_once, [&] {
      std::vector<int8_t> codes(static_cast<size_t>(packed.N() * packed.K()));
      for (int64_t n = 0; n < packed.N(); ++n) packed.row(n, codes.data() + n * packed.K());
      onednn = std::make_unique<OnednnInt8Weights>(codes.data(), packed.N(), packed.K(), packed.K(), scales.data());
    });
    return *onednn;
  }
};

namespace {

// Code bytes per row in the stored codes tensor: whole u16 elements.
int64_t stored_row_bytes(int64_t in) { return (in + 1) / 2 * 2; }

}  // namespace

W8a8Weight::W8a8Weight(Shape shape, DType dtype, std::shared_ptr<State> state)
    : QuantizedWeight(std::move(shape), dtype), state_(std::move(state)) {}

std::vector<StoredSpec> W8a8Weight::layout(const Shape& shape) {
  TRI_ASSERT(shape.size() == 2, "a w8a8 weight of shape ", shape);
  return {{"codes", DType::kU16, Shape{shape[0], stored_row_bytes(shape[1]) / 2}},
          {"scales", DType::kF32, Shape{shape[0]}}};
}

W8a8Weight W8a8Weight::quantize(const Tensor& w, const std::string& name) {
  TRI_CHECK(is_floating(w.dtype()), "w8a8: '", name, "' is ", dtype_name(w.dtype()), ", not a floating dtype");
  TRI_CHECK(w.dim() == 2 && w.size(0) > 0 && w.size(1) > 0, "w8a8: '", name, "' is ", w.shape(),
            ", not a non-empty (out, in) matrix");
  const int64_t out = w.size(0), in = w.size(1), ld = stored_row_bytes(in);
  TRI_CHECK(in <= kernels::cpu::kInt8GemmMaxK, "w8a8: '", name, "' ", w.shape(), " has rows of ", in,
            " inputs; int32 sums hold at most ", kernels::cpu::kInt8GemmMaxK, " (leave it in full precision: --skip)");
  const Tensor f = core::contiguous(core::cast(core::to_device(w, Device::cpu()), DType::kF32));
  const float* x = f.data_ptr<float>();
  std::vector<int8_t> codes(static_cast<size_t>(out * ld), 0);
  std::vector<float> scales(static_cast<size_t>(out));
  parallel_for(0, out, std::max<int64_t>(1, 65536 / in), [&](int64_t r0, int64_t r1) {
    kernels::cpu::quantize_rows_int8(x + r0 * in, r1 - r0, in, in, codes.data() + r0 * ld, ld, scales.data() + r0);
  });
  for (int64_t r = 0; r < out; ++r)
    if (!std::isfinite(scales[r]))
      for (int64_t k = 0; k < in; ++k)
        TRI_CHECK(std::isfinite(x[r * in + k]), "w8a8: '", name, "' holds ", x[r * in + k], " at row ", r, ", column ",
                  k, ": only finite weights can be quantized");
  return W8a8Weight(w.shape(), w.dtype(), std::make_shared<State>(codes.data(), out, in, ld, scales.data()));
}

W8a8Weight W8a8Weight::from_stored(const Shape& shape, DType dtype, const std::vector<Tensor>& stored) {
  TRI_ASSERT(stored.size() == 2, "w8a8: ", stored.size(), " stored tensors");
  const int64_t out = shape[0], in = shape[1], ld = stored_row_bytes(in);
  const Tensor codes = core::contiguous(stored[0]), scales = core::contiguous(stored[1]);
  const auto* c = static_cast<const int8_t*>(codes.raw_data());
  const float* s = scales.data_ptr<float>();
  for (int64_t r = 0; r < out; ++r) {
    TRI_CHECK(std::isfinite(s[r]) && s[r] >= 0.0f, "w8a8: the scale of row ", r, " is ", s[r],
              ": scales are finite and >= 0");
    for (int64_t k = 0; k < in; ++k)
      TRI_CHECK(c[r * ld + k] != -128, "w8a8: the code at row ", r, ", column ", k,
                " is -128: codes lie in [-127, 127] (Note [Int8 signs] in kernels/cpu/int8_gemm.cc)");
  }
  return W8a8Weight(shape, dtype, std::make_shared<State>(c, out, in, ld, s));
}

int64_t W8a8Weight::bytes() const {
  return shape()[0] * (stored_row_bytes(shape()[1]) + static_cast<int64_t>(sizeof(float)));
}

void W8a8Weight::dequantize_into(int64_t begin, int64_t end, DType dtype, void* out) const {
  check_range(begin, end);
  TRI_CHECK(is_floating(dtype), "w8a8: dequantize into ", dtype_name(dtype), ", not a floating dtype");
  const int64_t in = shape()[1];
  ops::dispatch_floating(dtype, "w8a8_dequantize", [&]<class T>() {
    T* o = static_cast<T*>(out);
    parallel_for(begin / in, (end + in - 1) / in, 16, [&](int64_t r0, int64_t r1) {
      std::vector<int8_t> row(static_cast<size_t>(in));
      for (int64_t r = r0; r < r1; ++r) {
        state_->packed.row(r, row.data());
        const int64_t k0 = std::max(begin, r * in) - r * in, k1 = std::min(end, (r + 1) * in) - r * in;
        for (int64_t k = k0; k < k1; ++k)
          o[r * in + k - begin] = static_cast<T>(static_cast<float>(row[k]) * state_->scales[r]);
      }
    });
  });
}

std::shared_ptr<const QuantizedWeight> W8a8Weight::to(Device device) const {
  TRI_CHECK_NOT_IMPLEMENTED(device.is_cpu(), "w8a8 weights run on the CPU only (its int8 dot products); asked to "
                            "move one to ", device.str());
  return std::make_shared<W8a8Weight>(*this);
}

std::vector<std::pair<std::string, Tensor>> W8a8Weight::stored() const {
  const int64_t out = shape()[0], in = shape()[1], ld = stored_row_bytes(in);
  const std::vector<StoredSpec> specs = layout(shape());
  Tensor codes = zeros(specs[0].shape, DType::kU16), scales = empty(specs[1].shape, DType::kF32);
  auto* c = static_cast<int8_t*>(codes.raw_data());
  for (int64_t r = 0; r < out; ++r) state_->packed.row(r, c + r * ld);
  std::copy(state_->scales.begin(), state_->scales.end(), scales.data_ptr<float>());
  return {{"codes", codes}, {"scales", scales}};
}

bool W8a8Weight::fused_product(DType dtype, const void* x, int64_t M, void* y, const void* bias) const {
  if (dtype != DType::kF32 || M < 1) return false;
  const int64_t out = shape()[0], in = shape()[1];
  const auto* xf = static_cast<const float*>(x);
  auto* yf = static_cast<float*>(y);
  std::vector<int8_t> xq(static_cast<size_t>(M * in));
  std::vector<float> x_scale(static_cast<size_t>(M));
  parallel_for(0, M, std::max<int64_t>(1, 65536 / in), [&](int64_t r0, int64_t r1) {
    kernels::cpu::quantize_rows_int8(xf + r0 * in, r1 - r0, in, in, xq.data() + r0 * in, in, x_scale.data() + r0);
  });
  // See Note [Int8 GEMM engines]; oneDNN runs its own threads, so not inside a parallel region.
  if (M <= kW8a8OwnKernelRows || omp_in_parallel())
    kernels::cpu::int8_gemm(M, xq.data(), in, x_scale.data(), state_->packed, nullptr, yf, out);
  else
    kernels::cpu::onednn_int8_gemm(M, xq.data(), in, x_scale.data(), state_->onednn_weights(), nullptr, yf, out);
  // The bias after the scaling, not in the kernels' epilogue (a multiply-add, one rounding):
  // the separate add's bits (Note [The bias in the quantized product]).
  if (bias != nullptr) add_bias_rows(yf, M, out, static_cast<const float*>(bias));
  return true;
}

}  // namespace trident::quantization
