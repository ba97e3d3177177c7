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

}  // namespace trident
