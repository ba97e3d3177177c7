#include "nn/norm.h"

#include "autograd/functions.h"
#include "core/factory.h"

namespace trident::nn {

LayerNorm::LayerNorm(int64_t dim, double eps, DType dtype)
    : weight_(register_parameter("weight", ones({dim}, dtype))),
      bias_(register_parameter("bias", zeros({dim}, dtype))),
      eps_(eps) {}

Tensor LayerNorm::forward(const Tensor& x) const {
  return style_ ? style_->forward(x, weight_, bias_, eps_) : trident::layernorm(x, weight_, bias_, eps_);
}

RMSNorm::RMSNorm(int64_t dim, double eps, DType dtype)
    : weight_(register_parameter("weight", ones({dim}, dtype))), eps_(eps) {}

Tensor RMSNorm::forward(const Tensor& x) const {
  return style_ ? style_->forward(x, weight_, eps_) : trident::rmsnorm(x, weight_, eps_);
}

}  // namespace trident::nn
