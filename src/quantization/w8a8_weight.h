// W8A8 weights for inference: the scheme "w8a8", ONNX Runtime's dynamic quantization in
// symmetric form. The (out, in) weight is quantized once per output channel to int8 (a scale
// per row, absmax / 127: kernels/cpu/int8_quantize.h); at run time each input row (token) is
// quantized the same way and the product is summed exactly in int32 by the CPU's int8 dot
// products (kernels/cpu/int8_gemm.h, or oneDNN's int8 matmul: Note [Int8 GEMM engines]), then
// scaled once in fp32. GPT-2's Conv1D weights, stored (in, out), are quantized as their
// transpose. Host only; f32 inputs take the int8 product, others the generic dequantizing one.
//
// Stored tensors (trident has no 8-bit dtype; as Note [Codes and scales apart] in
// ggml_weight.h): codes (out, ceil(in / 2)) u16 holding each row's int8 codes as bytes in order
// (a zero byte after an odd row), scales (out) f32.
//
// Note [Int8 GEMM engines]
// Which kernel multiplies? trident's own (AVX-512 VNNI here) reads each weight byte once per
// call and wins for a decode step's rows; from 16 rows on, oneDNN's matmul, on AMX-int8 tiles on
// Sapphire/Emerald Rapids, is ahead. Measured with bench/int8_gemm_bench on a shared 2-core
// Emerald Rapids (loaded: timings within ~2x), weights rotated out of L2 as a decode step meets
// them, trident vs oneDNN in ms: qkv 768x2304 at 1 thread, 1 row 0.151 vs 0.296, 4 rows 0.150
// vs 0.302, 8 rows 0.202 vs 0.165, 16 rows (weight in cache) 0.146 vs 0.088, 128 rows 1.12 vs
// 0.73; at 2 threads 8 rows 0.170 vs 0.173 and mlp_up 8 rows 0.270 vs 0.439. 8 rows is a tie,
// so trident's kernel keeps batch-8 decode, and oneDNN's weight copy (its blocked layout, made on
// the first product of more than kW8a8OwnKernelRows rows) is needed only once a prompt of more
// rows arrives. Both give the same bits, so the choice is only speed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "quantization/quantized_weight.h"

namespace trident::quantization {

// Products of up to this many rows use trident's kernel; more, oneDNN's (Note [Int8 GEMM engines]).
inline constexpr int64_t kW8a8OwnKernelRows = 8;

class W8a8Weight final : public QuantizedWeight {
 public:
  // Quantizes the (out, in) matrix `w` (floating, any device: read on the host) per row. Throws
  // naming `name` for a weight that is not a matrix, that holds a non-finite value, or whose
  // rows are longer than int32 sums allow.
  static W8a8Weight quantize(const Tensor& w, const std::string& name = "weight");
  // The tensors stored() has for an (out, in) weight: codes, scales.
  static std::vector<StoredSpec> layout(const Shape& shape);
  // From tensors of layout(shape)'s dtypes and shapes (a file's; the caller checked those).
  // Throws naming the row and value for a scale that is negative or not finite, or a code of
  // -128.
  static W8a8Weight from_stored(const Shape& shape, DType dtype, const std::vector<Tensor>& stored);

  std::string scheme() const override { return "w8a8"; }
  Device device() const override { return Device::cpu(); }
  int64_t bytes() const override;
  void dequantize_into(int64_t begin, int64_t end, DType dtype, void* out) const override;
  std::shared_ptr<const QuantizedWeight> to(Device device) const override;
  std::vector<std::pair<std::string, Tensor>> stored() const override;
  // f32 inputs, any number of rows: quantized per row, multiplied in int8 (Note [Int8 GEMM
  // engines]). Uses every thread.
  bool fused_product(DType dtype, const void* x, int64_t M, void* y, const void* bias) const override;

  // The weight's codes and scales as the int8 kernels read them.
  struct State;

 private:
  W8a8Weight(Shape shape, DType dtype, std::shared_ptr<State> state);
  std::shared_ptr<State> state_;  // shared by copies: immutable, but for oneDNN's copy made once
};

}  // namespace trident::quantization
