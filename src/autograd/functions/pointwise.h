// Differentiable pointwise functions. See ops/pointwise.h for definitions and domains.
// Backward rules: autograd/derivatives/pointwise.cc. Each backward is one fused kernel
// reading the gradient and one saved tensor (the output for exp, tanh and sqrt, the input
// for the others).
// These names shadow the C library's inside namespace trident: call std::exp(double) etc.
// qualified there.
#pragma once

#include "core/tensor.h"

namespace trident {

Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sqrt(const Tensor& x);
// x^exponent (like torch.pow(x, 2.0)); negative x needs an integer exponent.
Tensor pow(const Tensor& x, double exponent);
// GELU with the tanh approximation: PyTorch's approximate='tanh', GPT-2's NewGELU.
Tensor gelu_tanh(const Tensor& x);
// Exact GELU: x/2 (1 + erf(x / sqrt 2)).
Tensor gelu(const Tensor& x);
// x sigmoid(x).
Tensor silu(const Tensor& x);

}  // namespace trident
