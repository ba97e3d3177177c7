#include "nn/norm.h"

#include "autograd/functions.h"
#include "core/factory.h"

namespace trident::nn {

Tensor NormInner::forward(const Tensor& x, const LayerParams& p) const {
  return next(&NormWrapper::forward, &NormLayer::compute, x, p);
}

Tensor NormLayer::run(const Tensor& x, const LayerParams& p) const {
  return wrapped() ? NormInner(*this, 0).forward(x, p) : compute(x, p);
}

LayerNorm::LayerNorm(int64_t dim, double eps, DType dtype)
    : weight_(register_parameter("weight", ones({dim}, dtype))),
      bias_(register_parameter("bias", zeros({dim}, dtype))),
      eps_(eps) {}

Tensor LayerNorm::compute(const Tensor& x, const LayerParams& p) const {
  return trident::layernorm(x, p.weight, p.bias, eps_);
}

RMSNorm::RMSNorm(int64_t dim, double eps, DType dtype)
    : weight_(register_parameter("weight", ones({dim}, dtype))), eps_(eps) {}

Tensor RMSNorm::compute(const Tensor& x, const LayerParams& p) const { return trident::rmsnorm(x, p.weight, eps_); }

}  // namespace trident::nn
