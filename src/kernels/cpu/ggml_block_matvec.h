// Decode's product with a Q8_0 or Q4_0 weight (kernels/cpu/ggml_blocks.h) on the host:
// y (M, rows) = x (M, cols) W^T for a few rows of x (decode's batch, M <= kGgmlMatvecMaxRows),
// with the dequantization fused into the dot products. At decode the product reads every weight
// once and does M multiply-adds with it, so its time is the weight's bytes over the memory
// bandwidth: each code byte is read once, widened to fp32 in registers, multiplied with the M
// rows of x (which stay in L1) and each block's sum scaled by its d; no dequantized weight is
// ever written. Prefill's many rows go through the tiled dequantize-and-GEMM path instead
// (quantization/quantized_matmul.h).
//
// Paths: AVX-512 (16 lanes), AVX2 + FMA (8 lanes), and plain C++; ggml_matvec_isa() picks the
// best this CPU has at run time (AVX-512 only while kernels.cpu_avx512 is on, as AdamW's). Each
// output element is one thread's sum in a fixed order, so a result does not depend on the thread
// count; the paths differ from each other in summation order only. Accumulation in fp32.
#pragma once

#include <cstdint>

#include "kernels/cpu/ggml_blocks.h"

namespace trident::kernels::cpu {

inline constexpr int64_t kGgmlMatvecMaxRows = 8;

enum class MatvecIsa { kScalar, kAvx2, kAvx512 };
const char* matvec_isa_name(MatvecIsa isa);
// The fastest path this CPU runs (and the kernel switches allow).
MatvecIsa ggml_matvec_isa();
// Whether this CPU runs `isa`.
bool ggml_matvec_supports(MatvecIsa isa);

// Output columns [r0, r1) of y (M, rows; row stride ldy) = x (M, cols; row stride cols) W^T,
// W (rows, cols) in blocks of `t` (codes and scales of row r at r * cols / 32 blocks). cols is a
// multiple of 32; 1 <= M <= kGgmlMatvecMaxRows. Serial: callers split the output columns.
void ggml_block_matvec(GgmlBlockType t, MatvecIsa isa, const float* x, int64_t M, const uint8_t* codes,
                       const uint16_t* scales, int64_t cols, int64_t r0, int64_t r1, float* y, int64_t ldy);

}  // namespace trident::kernels::cpu
