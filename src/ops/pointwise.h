// Pointwise function front ends (no autograd): exp, log, tanh, sqrt, pow, gelu_tanh, gelu,
// silu and their backward kernels. Each validates the dtype (floating) and, for backward,
// that grad matches the saved tensor in shape, dtype and device; makes non-contiguous
// inputs contiguous; allocates a contiguous result and dispatches to kernels/cpu/pointwise.
// Domains follow the C library: log and sqrt of negative values give NaN, pow of a
// negative value needs an integer exponent (else NaN). These are not checked (it would
// cost a pass over the data); they are documented here.
#pragma once

#include "core/tensor.h"

namespace trident::ops {

Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);
// GELU, tanh approximation (PyTorch approximate='tanh', GPT-2's NewGELU):
// x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
Tensor gelu_tanh(const Tensor& x);
// GELU, exact: x/2 (1 + erf(x / sqrt 2)).
Tensor gelu(const Tensor& x);
// SiLU (swish): x sigmoid(x).
Tensor silu(const Tensor& x);

// Backward: grad * f'(x), computed in one pass from the tensor named: the forward's output
// `out` (exp, tanh, sqrt) or its input `x` (the others).
Tensor exp_backward(const Tensor& grad, const Tensor& out);
Tensor log_backward(const Tensor& grad, const Tensor& x);
Tensor tanh_backward(const Tensor& grad, const Tensor& out);
Tensor sqrt_backward(const Tensor& grad, const Tensor& out);
Tensor pow_backward(const Tensor& grad, const Tensor& x, double exponent);
Tensor gelu_tanh_backward(const Tensor& grad, const Tensor& x);
Tensor gelu_backward(const Tensor& grad, const Tensor& x);
Tensor silu_backward(const Tensor& grad, const Tensor& x);

}  // namespace trident::ops
