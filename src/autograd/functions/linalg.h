// Differentiable matrix products. See ops/linalg.h for shapes.
// Backward rules: autograd/derivatives/linalg.cc.
#pragma once

#include <optional>

#include "core/tensor.h"

namespace trident {

// a (..., M, K) @ b (..., K, N) -> (..., M, N), batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
// x (..., in) @ w^T + bias, w (out, in), bias (out) or none.
Tensor linear(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias = std::nullopt);
// gelu_tanh(linear(x, w, bias)) as one op: one GEMM with a GELU epilogue on a device that has
// one. Saves what the two ops would (x, w and the GELU's input), so it costs no extra memory.
Tensor linear_gelu_tanh(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias = std::nullopt);

}  // namespace trident
