// Products with an NF4 weight (quantization/nf4.h) on the host, dequantized tile by tile
// inside the product: a tile of the weight's rows (about a megabyte) is dequantized into a
// scratch buffer and multiplied with BLAS (kernels/cpu/matmul.h), so the whole weight never
// exists at full precision. The weight is 2-D, (out, in) as torch's Linear (in_out false) or
// (in, out) as Hugging Face's Conv1D (in_out true); x and y are row-major, contiguous.
//
// A tile spans whole rows: with an (out, in) weight the forward's tiles are blocks of output
// columns (written once) and the input gradient sums over them; with (in, out) the other way
// round. Sums over tiles are kept in fp32 for bf16 and f16 (one rounding at the end) and use
// BLAS's accumulation (beta = 1) for f32 and f64. Tiles depend on the shape only, so results
// are bitwise independent of the thread count.
#pragma once

#include <cstdint>

#include "quantization/nf4.h"

namespace trident::quantization {

// y (M, out) = x (M, in) @ W^T for W (out, in), or x @ W for W (in, out).
template <class T>
void nf4_matmul(const T* x, int64_t M, const Nf4Weight& w, bool in_out, T* y);

// dx (M, in) = dy (M, out) @ W for W (out, in), or dy @ W^T for W (in, out).
template <class T>
void nf4_matmul_input_grad(const T* dy, int64_t M, const Nf4Weight& w, bool in_out, T* dx);

// Rows of the weight per tile (a shape's alone).
int64_t nf4_tile_rows(int64_t rows, int64_t row_length);

}  // namespace trident::quantization
