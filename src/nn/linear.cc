#include "nn/linear.h"

#include "autograd/functions.h"
#include "core/factory.h"

namespace trident::nn {

Tensor LinearInner::forward(const Tensor& x, const LayerParams& p, const LinearCall& call) const {
  return next(&LinearWrapper::forward, &LinearLayer::compute, x, p, call);
}

Tensor LinearInner::loss(const Tensor& x, const LayerParams& p, const Tensor& targets) const {
  return next(&LinearWrapper::loss, &LinearLayer::compute_loss, x, p, targets);
}

Tensor LinearWrapper::loss(const Tensor& x, const LayerParams& p, const Tensor& targets,
                           const LinearInner& inner) const {
  return trident::cross_entropy(forward(x, p, {}, inner), targets);
}

Tensor LinearLayer::compute_loss(const Tensor&, const LayerParams&, const Tensor&) const {
  TRI_CHECK(false, "this linear layer is not an LM head (only nn::Linear computes a loss)");
}

Tensor LinearLayer::run(const Tensor& x, const LayerParams& p, const LinearCall& call) const {
  return wrapped() ? LinearInner(*this, 0).forward(x, p, call) : compute(x, p, call);
}

Tensor LinearLayer::product(const Tensor& x, const Tensor& w, const LayerParams& p, const LinearCall& call) {
  const std::optional<Tensor>& b = call.bias ? p.bias : kNoBias;
  return call.act == Activation::kGeluTanh ? trident::linear_gelu_tanh(x, w, b) : trident::linear(x, w, b);
}

Linear::Linear(int64_t in, int64_t out, bool bias, DType dtype)
    : weight_(register_parameter("weight", zeros({out, in}, dtype))) {
  if (bias) bias_ = register_parameter("bias", zeros({out}, dtype));
}

Tensor Linear::forward(const Tensor& x) const { return run(x, {weight_, bias_}, {}); }

Tensor Linear::loss(const Tensor& x, const Tensor& targets) const {
  TRI_CHECK(!bias_.has_value(), "Linear::loss: an LM head has no bias");
  const LayerParams p{weight_, bias_};
  return wrapped() ? LinearInner(*this, 0).loss(x, p, targets) : compute_loss(x, p, targets);
}

Tensor Linear::compute(const Tensor& x, const LayerParams& p, const LinearCall& call) const {
  return product(x, p.weight, p, call);
}

Tensor Linear::compute_loss(const Tensor& x, const LayerParams& p, const Tensor& targets) const {
  return trident::linear_cross_entropy(x, p.weight, targets);
}

Conv1D::Conv1D(int64_t in, int64_t out, DType dtype)
    : weight_(register_parameter("weight", zeros({in, out}, dtype))),
      bias_(register_parameter("bias", zeros({out}, dtype))) {}

Tensor Conv1D::forward(const Tensor& x, Activation act) const { return run(x, {weight_, bias_}, {true, act}); }

Tensor Conv1D::compute(const Tensor& x, const LayerParams& p, const LinearCall& call) const {
  // linear() wants (out, in); the transposed view of (in, out) is exactly that, and BLAS
  // reads it as a transposed operand.
  return product(x, trident::transpose(p.weight, 0, 1), p, call);
}

}  // namespace trident::nn
