// Differentiable pointwise functions: forward through ops/pointwise, and the backward rule
// of each op next to it. Every backward is a single fused kernel (ops::*_backward).
#include "autograd/functions/pointwise.h"

#include "autograd/record.h"
#include "ops/pointwise.h"

namespace trident {
using namespace autograd;

TRI_REGISTER_OP(kExp, "exp");
TRI_REGISTER_OP(kLog, "log");
TRI_REGISTER_OP(kTanh, "tanh");
TRI_REGISTER_OP(kSqrt, "sqrt");
TRI_REGISTER_OP(kPow, "pow");
TRI_REGISTER_OP(kGeluTanh, "gelu_tanh");
TRI_REGISTER_OP(kGelu, "gelu");
TRI_REGISTER_OP(kSilu, "silu");

Tensor exp(const Tensor& x) {
  TRI_PROFILE_OP(kExp);
  Tensor out = ops::exp(x);
  if (needs_grad({x}))
    record(kExp, {x}, {out}, [sy = SavedTensor::output(out)](const BackwardContext& c) {
      // d e^x/dx = e^x
      return GradList{ops::exp_backward(c.grad(), sy.get())};
    });
  return out;
}

Tensor log(const Tensor& x) {
  TRI_PROFILE_OP(kLog);
  Tensor out = ops::log(x);
  if (needs_grad({x}))
    record(kLog, {x}, {out}, [sx = SavedTensor(x)](const BackwardContext& c) {
      // d log x/dx = 1/x
      return GradList{ops::log_backward(c.grad(), sx.get())};
    });
  return out;
}

Tensor tanh(const Tensor& x) {
  TRI_PROFILE_OP(kTanh);
  Tensor out = ops::tanh(x);
  if (needs_grad({x}))
    record(kTanh, {x}, {out}, [sy = SavedTensor::output(out)](const BackwardContext& c) {
      // d tanh x/dx = 1 - tanh^2 x
      return GradList{ops::tanh_backward(c.grad(), sy.get())};
    });
  return out;
}

Tensor sqrt(const Tensor& x) {
  TRI_PROFILE_OP(kSqrt);
  Tensor out = ops::sqrt(x);
  if (needs_grad({x}))
    record(kSqrt, {x}, {out}, [sy = SavedTensor::output(out)](const BackwardContext& c) {
      // d sqrt x/dx = 1 / (2 sqrt x)
      return GradList{ops::sqrt_backward(c.grad(), sy.get())};
    });
  return out;
}

Tensor pow(const Tensor& x, double exponent) {
  TRI_PROFILE_OP(kPow);
  Tensor out = ops::pow(x, exponent);
  if (needs_grad({x}))
    record(kPow, {x}, {out}, [sx = SavedTensor(x), exponent](const BackwardContext& c) {
      // d x^p/dx = p x^(p-1)  (0 when p = 0)
      return GradList{ops::pow_backward(c.grad(), sx.get(), exponent)};
    });
  return out;
}

Tensor gelu_tanh(const Tensor& x) {
  TRI_PROFILE_OP(kGeluTanh);
  Tensor out = ops::gelu_tanh(x);
  if (needs_grad({x}))
    record(kGeluTanh, {x}, {out}, [sx = SavedTensor(x)](const BackwardContext& c) {
      // d/dx x s(2u) = s + x s (1-s) 2u',  s = sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)
      return GradList{ops::gelu_tanh_backward(c.grad(), sx.get())};
    });
  return out;
}

Tensor gelu(const Tensor& x) {
  TRI_PROFILE_OP(kGelu);
  Tensor out = ops::gelu(x);
  if (needs_grad({x}))
    record(kGelu, {x}, {out}, [sx = SavedTensor(x)](const BackwardContext& c) {
      // d/dx x Phi(x) = Phi(x) + x phi(x)
      return GradList{ops::gelu_backward(c.grad(), sx.get())};
    });
  return out;
}

Tensor silu(const Tensor& x) {
  TRI_PROFILE_OP(kSilu);
  Tensor out = ops::silu(x);
  if (needs_grad({x}))
    record(kSilu, {x}, {out}, [sx = SavedTensor(x)](const BackwardContext& c) {
      // d/dx x s(x) = s (1 + x (1 - s)),  s = sigmoid(x)
      return GradList{ops::silu_backward(c.grad(), sx.get())};
    });
  return out;
}

}  // namespace trident
