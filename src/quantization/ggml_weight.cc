#include "quantization/ggml_weight.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "kernels/cpu/ggml_block_gemm.h"
#include "kernels/cpu/ggml_block_matvec.h"
#include "ops/dispatch.h"

namespace trident::quantization {
namespace {

using kernels::cpu::GgmlBlockType;
using kernels::cpu::kGgmlBlock;

// Code bytes per u16 element of the codes tensor.
constexpr int64_t kBytesPerElement = 2;

int64_t code_bytes_per_row(GgmlBlockType t, int64_t in) { return in / kGgmlBlock * kernels::cpu::ggml_code_bytes(t); }

}  // namespace

std::string GgmlWeight::scheme() const { return type_ == GgmlBlockType::kQ8_0 ? "int8" : "int4"; }

std::vector<StoredSpec> GgmlWeight::layout(GgmlBlockType type, const Shape& shape) {
  TRI_ASSERT(shape.size() == 2, "a ", kernels::cpu::ggml_block_type_name(type), " weight of shape ", shape);
  const int64_t out = shape[0], in = shape[1];
  return {{"codes", DType::kU16, Shape{out, code_bytes_per_row(type, in) / kBytesPerElement}},
          {"scales", DType::kF16, Shape{out, in / kGgmlBlock}}};
}

GgmlWeight GgmlWeight::quantize(GgmlBlockType type, const Tensor& w, const std::string& name) {
  const char* format = kernels::cpu::ggml_block_type_name(type);
  TRI_CHECK(is_floating(w.dtype()), format, ": '", name, "' is ", dtype_name(w.dtype()), ", not a floating dtype");
  TRI_CHECK(w.dim() == 2, format, ": '", name, "' is ", w.shape(), ", not an (out, in) matrix");
  const int64_t out = w.size(0), in = w.size(1);
  TRI_CHECK(in % kGgmlBlock == 0, format, ": '", name, "' ", w.shape(), " has ", in,
            " input features, not a multiple of the block of ", kGgmlBlock, " (leave it in full precision: --skip)");
  const Tensor f = core::contiguous(core::cast(core::to_device(w, Device::cpu()), DType::kF32));
  const float* x = f.data_ptr<float>();
  for (int64_t i = 0; i < out * in; ++i)
    TRI_CHECK(std::isfinite(x[i]), format, ": '", name, "' holds ", x[i], " at element ", i,
              ": only finite weights can be quantized");
  const std::vector<StoredSpec> specs = layout(type, w.shape());
  Tensor codes = empty(specs[0].shape, DType::kU16), scales = empty(specs[1].shape, DType::kF16);
  auto* c = static_cast<uint8_t*>(codes.raw_data());
  auto* s = static_cast<uint16_t*>(scales.raw_data());
  const int64_t row_bytes = code_bytes_per_row(type, in), nb = in / kGgmlBlock;
  parallel_for(0, out, std::max<int64_t>(1, 65536 / std::max<int64_t>(in, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) kernels::cpu::ggml_quantize_blocks(type, x + r * in, in, c + r * row_bytes, s + r * nb);
  });
  // A scale past fp16's range is stored as infinity: every weight of its block would be lost.
  for (int64_t b = 0; b < out * nb; ++b)
    TRI_CHECK((s[b] & 0x7c00u) != 0x7c00u, format, ": '", name, "' has a block (row ", b / nb, ", columns ",
              b % nb * kGgmlBlock, "..", b % nb * kGgmlBlock + kGgmlBlock - 1,
              ") whose scale overflows fp16 (its largest weight is above 65504 x 127): it cannot be stored in ", format);
  return GgmlWeight(type, w.shape(), w.dtype(), std::move(codes), std::move(scales));
}

GgmlWeight GgmlWeight::from_stored(GgmlBlockType type, DType dtype, const std::vector<Tensor>& stored) {
  TRI_ASSERT(stored.size() == 2, kernels::cpu::ggml_block_type_name(type), ": ", stored.size(), " stored tensors");
  const Shape shape{stored[1].size(0), stored[1].size(1) * kGgmlBlock};
  return GgmlWeight(type, shape, dtype, core::contiguous(stored[0]), core::contiguous(stored[1]));
}

int64_t GgmlWeight::bytes() const {
  return codes_.numel() * static_cast<int64_t>(element_size(codes_.dtype())) +
         scales_.numel() * static_cast<int64_t>(element_size(scales_.dtype()));
}

void GgmlWeight::dequantize_into(int64_t begin, int64_t end, DType dtype, void* out) const {
  check_range(begin, end);
  TRI_CHECK(is_floating(dtype), scheme(), ": dequantize into ", dtype_name(dtype), ", not a floating dtype");
  ops::dispatch_floating(dtype, "ggml_dequantize", [&]<class T>() {
    T* o = static_cast<T*>(out);
    parallel_for(begin, end, 64 * kGgmlBlock, [&](int64_t b, int64_t e) {
      kernels::cpu::ggml_dequantize<T>(type_, codes(), scales(), b, e, o + (b - begin));
    });
  });
}

std::shared_ptr<const QuantizedWeight> GgmlWeight::to(Device device) const {
  TRI_CHECK_NOT_IMPLEMENTED(device.is_cpu(), scheme(), " (", kernels::cpu::ggml_block_type_name(type_),
                            ") weights run on the CPU only for now; asked to move one to ", device.str());
  return std::make_shared<GgmlWeight>(*this);
}

std::vector<std::pair<std::string, Tensor>> GgmlWeight::stored() const { return {{"codes", codes_}, {"scales", scales_}}; }

bool GgmlWeight::fused_product(DType dtype, const void* x, int64_t M, void* y, const void* bias) const {
  if (dtype != DType::kF32 || M < 1) return false;
  const int64_t rows = shape()[0], cols = shape()[1];
  const kernels::cpu::MatvecIsa isa = kernels::cpu::ggml_matvec_isa();
  // x in Q8_0 blocks, once, before the split (Note [Integer dot products at decode]).
  const kernels::cpu::GgmlQ8Activations xq(type_, static_cast<const float*>(x), M, cols);
  auto* yf = static_cast<float*>(y);
  const auto* b = static_cast<const float*>(bias);
  if (M > kernels::cpu::kGgmlMatvecMaxRows) {
    // Prefill: the weight repacked into panels reused by every row (Note [Integer GEMM at prefill]).
    kernels::cpu::ggml_block_gemm(type_, isa, xq, codes(), scales(), rows, yf, rows, b);
    return true;
  }
  // Whole rows per thread, at least ~64K weights each: a thread's rows are its own sums, so the
  // split does not change a bit.
  parallel_for(0, rows, std::max<int64_t>(16, 65536 / cols), [&](int64_t r0, int64_t r1) {
    kernels::cpu::ggml_block_matvec(type_, isa, xq, codes(), scales(), r0, r1, yf, rows);
    if (b != nullptr)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t r = r0; r < r1; ++r) yf[m * rows + r] += b[r];
  });
  return true;
}

}  // namespace trident::quantization
