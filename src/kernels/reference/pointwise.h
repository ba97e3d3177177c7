// Reference pointwise functions: one float64 value in, one out, via the C library's
// std::exp/log/tanh/sqrt/pow/erf in naive loops. The definitions follow PyTorch:
//   gelu(x)      = x/2 (1 + erf(x/sqrt 2))                            (exact GELU)
//   gelu_tanh(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))      (approximate='tanh')
//   silu(x)      = x sigmoid(x) = x / (1 + exp(-x))
//   swiglu(g, u) = silu(g) u                                          (LLaMA's MLP gate)
// No derivatives here: tests check gradients by finite differences of these functions.
#pragma once

#include "kernels/reference/array.h"

namespace trident::reference {

Array exp(const Array& x);
Array log(const Array& x);
Array tanh(const Array& x);
Array sqrt(const Array& x);
// x^exponent elementwise (std::pow: negative x needs an integer exponent).
Array pow(const Array& x, double exponent);
Array gelu_tanh(const Array& x);
Array gelu(const Array& x);
Array silu(const Array& x);
// silu(gate) * up, elementwise; gate and up of one shape.
Array swiglu(const Array& gate, const Array& up);

}  // namespace trident::reference
