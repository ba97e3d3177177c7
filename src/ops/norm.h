// Normalization front ends (no autograd): layernorm and rmsnorm over the last dim of
// x (..., C). They validate, make inputs contiguous, allocate outputs and dispatch to
// kernels/cpu/{layernorm,rmsnorm}. Each forward also returns the per-row statistics its
// backward needs, shaped like x without its last dim, in the accumulation dtype (f32; f64
// for f64 inputs). weight and bias are (C) tensors of x's dtype, each optional.
// Does not: normalize over several trailing dims (a normalized_shape of length > 1) or keep
// running statistics.
#pragma once

#include <optional>

#include "core/tensor.h"

namespace trident::ops {

struct LayerNormOutput {
  Tensor out;   // (..., C), x's dtype
  Tensor mean;  // (...), accumulation dtype: saved for the backward
  Tensor rstd;  // (...), accumulation dtype: 1 / sqrt(var + eps), saved for the backward
};
// (x - mean) / sqrt(var + eps) * weight + bias over the last dim (biased variance), as
// torch.nn.functional.layer_norm(x, (C,), weight, bias, eps). eps must be finite and >= 0.
LayerNormOutput layernorm(const Tensor& x, const std::optional<Tensor>& weight,
                          const std::optional<Tensor>& bias, double eps);

struct LayerNormGrads {
  std::optional<Tensor> dx, dweight, dbias;  // present when requested
};
// Gradients of layernorm from dout (x's shape and dtype) and the forward's mean and rstd.
// weight is the forward's weight (or none). Only the requested gradients are computed.
LayerNormGrads layernorm_backward(const Tensor& dout, const Tensor& x,
                                  const std::optional<Tensor>& weight, const Tensor& mean,
                                  const Tensor& rstd, bool need_dx, bool need_dweight,
                                  bool need_dbias);

struct RMSNormOutput {
  Tensor out;   // (..., C), x's dtype
  Tensor rstd;  // (...), accumulation dtype: 1 / sqrt(mean(x^2) + eps), saved for the backward
};
// x / sqrt(mean(x^2) + eps) * weight over the last dim, as torch.nn.RMSNorm and LLaMA.
// eps must be finite and >= 0.
RMSNormOutput rmsnorm(const Tensor& x, const std::optional<Tensor>& weight, double eps);

struct RMSNormGrads {
  std::optional<Tensor> dx, dweight;  // present when requested
};
// Gradients of rmsnorm from dout (x's shape and dtype) and the forward's rstd.
RMSNormGrads rmsnorm_backward(const Tensor& dout, const Tensor& x,
                              const std::optional<Tensor>& weight, const Tensor& rstd, bool need_dx,
                              bool need_dweight);

}  // namespace trident::ops
