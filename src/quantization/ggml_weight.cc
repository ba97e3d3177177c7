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
  const int64_t row_bytes = code_bytes_per_row(type, in), nb = in / kGgmlBlock;
  // ggml's rows first (the quantizer's and the overflow check's layout), then packed.
  std::vector<uint8_t> codes(static_cast<size_t>(out * row_bytes));
  std::vector<uint16_t> scales(static_cast<size_t>(out * nb));
  uint8_t* c = codes.data();
  uint16_t* s = scales.data();
  parallel_for(0, out, std::max<int64_t>(1, 65536 / std::max<int64_t>(in, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) kernels::cpu::ggml_quantize_blocks(type, x + r * in, in, c + r * row_bytes, s + r * nb);
  });
  // A scale past fp16's range is stored as infinity: every weight of its block would be lost.
  for (int64_t b = 0; b < out * nb; ++b)
    TRI_CHECK((s[b] & 0x7c00u) != 0x7c00u, format, ": '", name, "' has a block (row ", b / nb, ", columns ",
              b % nb * kGgmlBlock, "..", b % nb * kGgmlBlock + kGgmlBlock - 1,
              ") whose scale overflows fp16 (its largest weight is above 65504 x 127): it cannot be stored in ", format);
  return packed(type, w.shape(), w.dtype(), c, s);
}

GgmlWeight GgmlWeight::packed(GgmlBlockType type, const Shape& shape, DType dtype, const uint8_t* codes,
                              const uint16_t* scales) {
  const int64_t out = shape[0], in = shape[1], nb = in / kGgmlBlock, panels = kernels::cpu::ggml_panel_count(out);
  Tensor pc = empty({panels * nb, kernels::cpu::ggml_panel_block_bytes(type) / kBytesPerElement}, DType::kU16);
  Tensor ps = empty({panels * nb, kernels::cpu::kGgmlPanelRows}, DType::kF16);
  auto* c = static_cast<uint8_t*>(pc.raw_data());
  auto* s = static_cast<uint16_t*>(ps.raw_data());
  const int64_t row_bytes = code_bytes_per_row(type, in);
  parallel_for(0, panels, std::max<int64_t>(1, 65536 / std::max<int64_t>(in * kernels::cpu::kGgmlPanelRows, 1)),
               [&](int64_t p0, int64_t p1) {
                 const int64_t r0 = p0 * kernels::cpu::kGgmlPanelRows,
                               r1 = std::min(out, p1 * kernels::cpu::kGgmlPanelRows);
                 kernels::cpu::ggml_pack_panels(type, out, in, r0, r1, codes + r0 * row_bytes, scales + r0 * nb, c, s);
               });
  return GgmlWeight(type, shape, dtype, std::move(pc), std::move(ps));
}

GgmlWeight GgmlWeight::from_stored(GgmlBlockType type, DType dtype, const std::vector<Tensor>& stored) {
  TRI_ASSERT(stored.size() == 2, kernels::cpu::ggml_block_type_name(type), ": ", stored.size(), " stored tensors");
  const Shape shape{stored[1].size(0), stored[1].size(1) * kGgmlBlock};
  const Tensor codes = core::contiguous(core::to_device(stored[0], Device::cpu()));
  const Tensor scales = core::contiguous(core::to_device(stored[1], Device::cpu()));
  return packed(type, shape, dtype, static_cast<const uint8_t*>(codes.raw_data()),
                static_cast<const uint16_t*>(scales.raw_data()));
}

// The stored size, which reports and files compare: the panels' padding rows (at most 15 per
// weight) are not counted.
int64_t GgmlWeight::bytes() const {
  const int64_t blocks = shape()[0] * (shape()[1] / kGgmlBlock);
  return blocks * (kernels::cpu::ggml_code_bytes(type_) + 2);
}

kernels::cpu::GgmlPanels GgmlWeight::panels() const {
  return {type_, shape()[0], shape()[1], static_cast<const uint8_t*>(panel_codes_.raw_data()),
          static_cast<const uint16_t*>(panel_scales_.raw_data())};
}

void GgmlWeight::unpack_rows(int64_t r0, int64_t r1, uint8_t* codes, uint16_t* scales) const {
  TRI_CHECK(0 <= r0 && r0 <= r1 && r1 <= shape()[0], scheme(), ": rows [", r0, ", ", r1, ") of ", shape()[0]);
  kernels::cpu::ggml_unpack_panels(panels(), r0, r1, codes, scales);
}

void GgmlWeight::dequantize_into(int64_t begin, int64_t end, DType dtype, void* out) const {
  check_range(begin, end);
  TRI_CHECK(is_floating(dtype), scheme(), ": dequantize into ", dtype_name(dtype), ", not a floating dtype");
  ops::dispatch_floating(dtype, "ggml_dequantize", [&]<class T>() {
    T* o = static_cast<T*>(out);
    const int64_t in = shape()[1], nb = in / kGgmlBlock, cb = kernels::cpu::ggml_code_bytes(type_);
    parallel_for(begin, end, 64 * kGgmlBlock, [&](int64_t b, int64_t e) {
      // Row by row, each unpacked to ggml's blocks (Note [Codes and scales apart]) and dequantized.
      std::vector<uint8_t> codes(static_cast<size_t>(nb * cb));
      std::vector<uint16_t> scales(static_cast<size_t>(nb));
      for (int64_t i = b; i < e;) {
        const int64_t r = i / in, row_end = std::min(e, (r + 1) * in);
        unpack_rows(r, r + 1, codes.data(), scales.data());
        kernels::cpu::ggml_dequantize<T>(type_, codes.data(), scales.data(), i - r * in, row_end - r * in,
                                         o + (i - begin));
        i = row_end;
      }
    });
  });
}

std::shared_ptr<const QuantizedWeight> GgmlWeight::to(Device device) const {
  TRI_CHECK_NOT_IMPLEMENTED(device.is_cpu(), scheme(), " (", kernels::cpu::ggml_block_type_name(type_),
                            ") weights run on the CPU only for now; asked to move one to ", device.str());
  return std::make_shared<GgmlWeight>(*this);
}

std::vector<std::pair<std::string, Tensor>> GgmlWeight::stored() const {
  const std::vector<StoredSpec> specs = layout(type_, shape());
  Tensor codes = empty(specs[0].shape, DType::kU16), scales = empty(specs[1].shape, DType::kF16);
  auto* c = static_cast<uint8_t*>(codes.raw_data());
  auto* s = static_cast<uint16_t*>(scales.raw_data());
  const int64_t rows = shape()[0], nb = shape()[1] / kGgmlBlock, row_bytes = code_bytes_per_row(type_, shape()[1]);
  parallel_for(0, rows, std::max<int64_t>(1, 65536 / std::max<int64_t>(shape()[1], 1)), [&](int64_t r0, int64_t r1) {
    unpack_rows(r0, r1, c + r0 * row_bytes, s + r0 * nb);
  });
  return {{"codes", codes}, {"scales", scales}};
}

bool GgmlWeight::fused_product(DType dtype, const void* x, int64_t M, void* y, const void* bias) const {
  if (dtype != DType::kF32 || M < 1) return false;
  const int64_t rows = shape()[0], cols = shape()[1];
  const kernels::cpu::MatvecIsa isa = kernels::cpu::ggml_matvec_isa();
  // x in Q8_0 blocks, once, before the split (Note [Integer dot products at decode]).
  const kernels::cpu::GgmlQ8Activations xq(type_, static_cast<const float*>(x), M, cols);
  auto* yf = static_cast<float*>(y);
  const auto* b = static_cast<const float*>(bias);
  if (M > kernels::cpu::kGgmlMatvecMaxRows) {
    // Prefill: each panel widened once for every row (Note [Integer GEMM at prefill]).
    kernels::cpu::ggml_block_gemm(isa, xq, panels(), yf, rows, b);
    return true;
  }
  // Whole panels per thread, at least ~64K weights each: a thread's rows are its own sums, so the
  // split does not change a bit.
  const kernels::cpu::GgmlPanels w = panels();
  parallel_for(0, w.panels(), std::max<int64_t>(1, 65536 / (cols * kernels::cpu::kGgmlPanelRows)),
               [&](int64_t p0, int64_t p1) {
                 kernels::cpu::ggml_block_matvec(isa, xq, w, p0, p1, yf, rows);
                 if (b != nullptr)
                   for (int64_t m = 0; m < M; ++m)
                     for (int64_t r = p0 * kernels::cpu::kGgmlPanelRows;
                          r < std::min(rows, p1 * kernels::cpu::kGgmlPanelRows); ++r)
                       yf[m * rows + r] += b[r];
               });
  return true;
}

}  // namespace trident::quantization
