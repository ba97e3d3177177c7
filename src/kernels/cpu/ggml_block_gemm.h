// Prefill's product with a Q8_0 or Q4_0 weight (kernels/cpu/ggml_blocks.h) on the host:
// y (M, rows) = x (M, cols) W^T for many rows of x (a prompt's tokens, M > kGgmlMatvecMaxRows),
// computed as llama.cpp computes it: x quantized to Q8_0 blocks once per product
// (GgmlQ8Activations), each block's 32 x 32 dot product exact in int32, scaled by the two
// blocks' fp16 scales and summed over the blocks in fp32 in block order (Note [Integer GEMM at
// prefill] in ggml_block_gemm.cc). Decode's few rows use ggml_block_matvec instead, which reads
// each of the weight's panels once, as it is held.
//
// Paths as ggml_block_matvec's (MatvecIsa: AVX-512 VNNI, AVX2, plain C++). Every block's integer
// sum is exact on every path; paths differ in the fp32 sums' rounding only. Each output element
// is one thread's sum in block order, so the result does not depend on the thread count.
#pragma once

#include <cstdint>

#include "kernels/cpu/ggml_block_matvec.h"

namespace trident::kernels::cpu {

// y (x.M(), w.rows; row stride ldy) = x W^T, x as GgmlQ8Activations for w's type, W in panels
// (kernels/cpu/ggml_panels.h). Any M >= 1; parallel over the output columns (parallel_for). With
// `bias` (w.rows values), y's rows are x W^T + bias, added to each register tile's sums as they
// are stored: the same one rounding a separate add gives.
void ggml_block_gemm(MatvecIsa isa, const GgmlQ8Activations& x, const GgmlPanels& w, float* y, int64_t ldy,
                     const float* bias = nullptr);

}  // namespace trident::kernels::cpu
