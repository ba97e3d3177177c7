#include "nn/linear.h"

#include "autograd/functions.h"
#include "core/factory.h"

namespace trident::nn {

Linear::Linear(int64_t in, int64_t out, bool bias, DType dtype)
    : weight_(register_parameter("weight", zeros({out, in}, dtype))) {
  if (bias) bias_ = register_parameter("bias", zeros({out}, dtype));
}

Tensor Linear::forward(const Tensor& x) const {
  return style_ ? style_->forward(x, weight_, bias_) : trident::linear(x, weight_, bias_);
}

Tensor Linear::loss(const Tensor& x, const Tensor& targets) const {
  TRI_CHECK(!bias_.has_value(), "Linear::loss: an LM head has no bias");
  return style_ ? style_->loss(x, weight_, targets) : trident::linear_cross_entropy(x, weight_, targets);
}

Conv1D::Conv1D(int64_t in, int64_t out, DType dtype)
    : weight_(register_parameter("weight", zeros({in, out}, dtype))),
      bias_(register_parameter("bias", zeros({out}, dtype))) {}

Tensor Conv1D::forward(const Tensor& x, Activation act) const {
  if (style_) return style_->forward(x, weight_, bias_, act);
  // linear() wants (out, in); the transposed view of (in, out) is exactly that, and BLAS
  // reads it as a transposed operand.
  const Tensor w = trident::transpose(weight_, 0, 1);
  return act == Activation::kGeluTanh ? trident::linear_gelu_tanh(x, w, bias_) : trident::linear(x, w, bias_);
}

}  // namespace trident::nn
