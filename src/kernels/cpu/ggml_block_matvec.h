// Decode's product with a Q8_0 or Q4_0 weight (kernels/cpu/ggml_blocks.h) on the host:
// y (M, rows) = x (M, cols) W^T for a few rows of x (decode's batch, M <= kGgmlMatvecMaxRows),
// computed as llama.cpp computes it (ggml_vec_dot_q8_0_q8_0, ggml_vec_dot_q4_0_q8_0): the rows of
// x are quantized to Q8_0 blocks once per product (GgmlQ8Activations), and each block's 32 weight
// codes meet the block's 32 activation codes in an exact int32 dot product, scaled once by the
// two blocks' scales. The weight is read in panels of 16 rows (kernels/cpu/ggml_panels.h), 16
// outputs at a time. At decode the product reads every weight once, so its time is the
// weight's bytes over the memory bandwidth if the arithmetic per byte is light enough for the
// cores to keep up (Note [Integer dot products at decode] in ggml_block_matvec.cc).
// Prefill's many rows go through ggml_block_gemm (ggml_block_gemm.h), which widens a few panels
// at a time into a buffer that it reuses for every row of x.
//
// Paths: AVX-512 VNNI (vpdpbusd on 64 bytes), AVX2 (vpmaddubsw), and plain C++;
// ggml_matvec_isa() picks the best this CPU has at run time (AVX-512 only while
// kernels.cpu_avx512 is on, as AdamW's). Every block's integer sum is exact on every path, and
// the scaled blocks are summed in fp32 in block order on every path: they differ only in where a
// multiply-add is fused. Each output element is one thread's sum, so a result does not depend on
// the thread count.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cpu/ggml_blocks.h"
#include "kernels/cpu/ggml_panels.h"

namespace trident::kernels::cpu {

inline constexpr int64_t kGgmlMatvecMaxRows = 8;

// 4 codes of x from p, as one int32 for the kernels to broadcast.
inline int32_t ggml_four_codes(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

enum class MatvecIsa { kScalar, kAvx2, kAvx512 };
const char* matvec_isa_name(MatvecIsa isa);
// The fastest path this CPU runs (and the kernel switches allow).
MatvecIsa ggml_matvec_isa();
// Whether this CPU runs `isa`.
bool ggml_matvec_supports(MatvecIsa isa);

// The rows of x (M, cols; cols a multiple of 32, finite) quantized to Q8_0 blocks exactly as
// ggml's quantize_row_q8_0_ref does (codes, and fp16 scales), plus what the kernels for weights
// of type `weight_type` read beside them: each block's scale as fp32 and its correction (the
// codes' sum times the weight codes' offset). Built once per product, before the output is split
// over threads (the rows are quantized in parallel, each as it would be alone); read-only
// afterwards. Any M >= 1: ggml_block_matvec takes up to kGgmlMatvecMaxRows, ggml_block_gemm any.
class GgmlQ8Activations {
 public:
  GgmlQ8Activations(GgmlBlockType weight_type, const float* x, int64_t M, int64_t cols);

  GgmlBlockType weight_type() const { return weight_type_; }
  int64_t M() const { return M_; }
  int64_t cols() const { return cols_; }
  int64_t blocks() const { return cols_ / kGgmlBlock; }
  // Row m's codes: cols bytes, block b's 32 at b * 32.
  const int8_t* codes(int64_t m) const { return codes_.get() + m * cols_; }
  // Row m's block b's scale (the fp32 value of its fp16 scale).
  float scale(int64_t m, int64_t b) const { return block_scales(m)[b]; }
  // Row m's block scales (fp32 values of the fp16 scales) and corrections for the unsigned weight
  // codes (Note [Integer dot products at decode]: -offset * the sum of the block's codes):
  // blocks() each.
  const float* block_scales(int64_t m) const { return block_scales_.data() + m * blocks(); }
  const int32_t* block_corrections(int64_t m) const { return block_corrections_.data() + m * blocks(); }

 private:
  GgmlBlockType weight_type_;
  int64_t M_, cols_;
  std::unique_ptr<int8_t[]> codes_;  // not zeroed first: every byte is written once
  std::vector<float> block_scales_;
  std::vector<int32_t> block_corrections_;
};

// Output columns of panels [p0, p1) of y (M, w.rows; row stride ldy) = x W^T (the panels' rows
// below w.rows), x as GgmlQ8Activations for w's type, W in panels (kernels/cpu/ggml_panels.h).
// 1 <= x.M() <= kGgmlMatvecMaxRows. Serial: callers split the panels.
void ggml_block_matvec(MatvecIsa isa, const GgmlQ8Activations& x, const GgmlPanels& w, int64_t p0, int64_t p1,
                       float* y, int64_t ldy);

}  // namespace trident::kernels::cpu
