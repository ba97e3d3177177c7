// Differentiable normalizations over the last dim of x (..., C): layernorm (GPT-2) and
// rmsnorm (LLaMA). weight and bias are (C) tensors of x's dtype, each optional. The forward
// caches the per-row statistics (mean and rstd) and the backward reuses them. See ops/norm.h
// for shapes and errors; backward rules in autograd/derivatives/norm.cc.
#pragma once

#include <optional>

#include "core/tensor.h"

namespace trident {

// (x - mean) / sqrt(var + eps) * weight + bias, biased variance, as
// torch.nn.functional.layer_norm(x, (C,), weight, bias, eps).
Tensor layernorm(const Tensor& x, const std::optional<Tensor>& weight = std::nullopt,
                 const std::optional<Tensor>& bias = std::nullopt, double eps = 1e-5);

// x / sqrt(mean(x^2) + eps) * weight, as torch.nn.RMSNorm and LLaMA.
Tensor rmsnorm(const Tensor& x, const std::optional<Tensor>& weight = std::nullopt,
               double eps = 1e-6);

}  // namespace trident
