// int8 and int4 weights for inference in GGUF's Q8_0 and Q4_0 block formats
// (kernels/cpu/ggml_blocks.h): the schemes "int8" and "int4". A weight is an (out, in) matrix
// quantized row by row along its input dimension in blocks of 32 (in must be a multiple of 32);
// GPT-2's Conv1D weights, stored (in, out), are quantized as their transpose (what llama.cpp's
// converter stores for GPT-2 too). Products: decode's few rows by the fused matrix-vector kernel
// (kernels/cpu/ggml_block_matvec.h: x in Q8_0 blocks too, integer dot products, as llama.cpp),
// more rows (prefill) by the integer GEMM (kernels/cpu/ggml_block_gemm.h: the same arithmetic,
// the weight's panels widened once for every row); bf16/f16 x and the input gradient
// through the tiled dequantize-and-GEMM path. Host
// only for now: to() a device is refused, naming the scheme.
//
// Note [Q8_0 rather than per-channel int8]
// The issue asks for "int8 per output channel"; Q8_0 keeps a scale per 32 weights of a row
// instead of one per row. Why? (1) Export to llama.cpp (issue #50) is then a copy: GGUF has no
// per-channel int8 type, and per-channel codes would have to be requantized, with a second
// rounding. (2) A finer scale is more accurate, most where a row has outliers: on 768 x 768
// N(0, 0.02) weights the relative RMS error is 0.54% (Q8_0) against 0.77% (per channel), and
// with 0.1% of the weights 10x larger 0.63% against 1.93% (tests/quantization/ggml_weight_test.cc
// prints both; Q4_0: 8.6% and 9.9%). (3) The cost is 2 bytes per 32 weights
// (1.0625 bytes per weight instead of ~1.0), 6% more to read at decode.
//
// Note [Codes and scales apart]
// GGUF stores a Q8_0 tensor as blocks {fp16 d; int8 qs[32]} back to back (34 bytes), Q4_0 as
// {fp16 d; uint8 qs[16]} (18 bytes). trident keeps the codes of all blocks in one tensor and the
// scales in another, each block's bytes exactly ggml's: a file can name them as two tensors
// (safetensors has no block dtypes), and a GGUF writer interleaves d and qs block by block, a
// copy. trident has no 8-bit dtype, so the codes are stored as u16 elements, two code bytes each
// in little-endian order: the bytes in a file are ggml's qs bytes in order. Shapes: codes (out,
// in / 2) u16 for Q8_0, (out, in / 4) u16 for Q4_0; scales (out, in / 32) f16. That is the
// stored layout (stored(), from_stored()). In memory the codes and the scales are two arrays
// too, in panels of 16 rows, the layout the kernels read (kernels/cpu/ggml_panels.h), packed
// and unpacked byte for byte.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/cpu/ggml_blocks.h"
#include "kernels/cpu/ggml_panels.h"
#include "quantization/quantized_weight.h"

namespace trident::quantization {

class GgmlWeight final : public QuantizedWeight {
 public:
  // Quantizes the (out, in) matrix `w` (floating, any device: read on the host) as ggml's
  // reference quantizer does. Throws naming `name` for a weight that is not a matrix, whose in
  // is not a multiple of 32, that holds a non-finite value, or whose block scale overflows fp16.
  static GgmlWeight quantize(kernels::cpu::GgmlBlockType type, const Tensor& w, const std::string& name = "weight");
  // The tensors stored() has for an (out, in) weight: codes, scales.
  static std::vector<StoredSpec> layout(kernels::cpu::GgmlBlockType type, const Shape& shape);
  // From tensors of layout()'s dtypes and shapes (a file's; the caller checked them).
  static GgmlWeight from_stored(kernels::cpu::GgmlBlockType type, DType dtype, const std::vector<Tensor>& stored);

  std::string scheme() const override;
  kernels::cpu::GgmlBlockType type() const { return type_; }
  Device device() const override { return panel_codes_.device(); }
  int64_t bytes() const override;
  void dequantize_into(int64_t begin, int64_t end, DType dtype, void* out) const override;
  std::shared_ptr<const QuantizedWeight> to(Device device) const override;
  std::vector<std::pair<std::string, Tensor>> stored() const override;
  // f32: up to kGgmlMatvecMaxRows rows the matrix-vector kernel, more the integer GEMM; output
  // columns split over threads.
  bool fused_product(DType dtype, const void* x, int64_t M, void* y, const void* bias) const override;

  // The weight as the kernels read it.
  kernels::cpu::GgmlPanels panels() const;
  // Rows [r0, r1) as ggml's blocks row after row (as stored() has them): codes
  // ((r1 - r0) * in / 32 * ggml_code_bytes bytes) and scales ((r1 - r0) * in / 32 fp16 bits).
  void unpack_rows(int64_t r0, int64_t r1, uint8_t* codes, uint16_t* scales) const;

 private:
  GgmlWeight(kernels::cpu::GgmlBlockType type, Shape shape, DType dtype, Tensor panel_codes, Tensor panel_scales)
      : QuantizedWeight(std::move(shape), dtype),
        type_(type),
        panel_codes_(std::move(panel_codes)),
        panel_scales_(std::move(panel_scales)) {}
  // From ggml's rows (codes and scales of all `shape` rows, row after row), packed in parallel.
  static GgmlWeight packed(kernels::cpu::GgmlBlockType type, const Shape& shape, DType dtype, const uint8_t* codes,
                           const uint16_t* scales);
  kernels::cpu::GgmlBlockType type_;
  Tensor panel_codes_;   // u16: the panels' code bytes, two per element
  Tensor panel_scales_;  // f16: 16 per panel and block
};

}  // namespace trident::quantization
