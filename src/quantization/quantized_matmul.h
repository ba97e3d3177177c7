// Products with a quantized weight (quantization/quantized_weight.h) on the host. The scheme's
// own kernel runs where it has one (QuantizedWeight::fused_product: Q8_0's and Q4_0's
// integer products for f32 x, rounded to Q8_0 blocks as llama.cpp rounds it; W8A8's int8
// products); otherwise a tile of the weight's rows (about a
// megabyte) is dequantized into a scratch buffer and multiplied with BLAS
// (kernels/cpu/matmul.h), so the whole weight never exists at full precision. The weight is
// 2-D, (out, in) as torch's Linear (in_out false) or (in, out) as Hugging Face's Conv1D (in_out
// true); x and y are row-major, contiguous.
//
// A tile spans whole rows: with an (out, in) weight the forward's tiles are blocks of output
// columns (written once) and the input gradient sums over them; with (in, out) the other way
// round. Sums over tiles are kept in fp32 for bf16 and f16 (one rounding at the end) and use
// BLAS's accumulation (beta = 1) for f32 and f64. Tiles depend on the shape only, so results
// are bitwise independent of the thread count (the fused kernels split by output rows).
#pragma once

#include <cstdint>

#include "quantization/quantized_weight.h"

namespace trident::quantization {

// y (M, out) = x (M, in) @ W^T for W (out, in), or x @ W for W (in, out); plus bias (out) when
// not null, f32 and f64 only (fused into the scheme's kernel where it has one; one rounded
// addition either way).
template <class T>
void quantized_matmul(const T* x, int64_t M, const QuantizedWeight& w, bool in_out, T* y, const T* bias = nullptr);

// y (M, n) += bias (n) in every row, in place, rows split over threads: the products' bias where
// the scheme's kernel does not add it itself.
void add_bias_rows(float* y, int64_t M, int64_t n, const float* bias);
void add_bias_rows(double* y, int64_t M, int64_t n, const double* bias);

// dx (M, in) = dy (M, out) @ W for W (out, in), or dy @ W^T for W (in, out). Always the tiled
// product.
template <class T>
void quantized_matmul_input_grad(const T* dy, int64_t M, const QuantizedWeight& w, bool in_out, T* dx);

// Rows of the weight per tile (a shape's alone).
int64_t quantized_tile_rows(int64_t rows, int64_t row_length);

}  // namespace trident::quantization
