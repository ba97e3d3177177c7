#include "nn/embedding.h"

#include "autograd/functions.h"
#include "core/factory.h"

namespace trident::nn {

Embedding::Embedding(int64_t num, int64_t dim, DType dtype)
    : weight_(register_parameter("weight", zeros({num, dim}, dtype))) {}

Tensor Embedding::forward(const Tensor& indices) const {
  return style_ ? style_->lookup(indices, weight_) : trident::embedding(weight_, indices);
}

Tensor Embedding::attend(const Tensor& h) const {
  // One GEMM against the table itself: linear() takes W (out, in) = (num, dim).
  return style_ ? style_->logits(h, weight_) : trident::linear(h, weight_);
}

Tensor Embedding::attend_loss(const Tensor& h, const Tensor& targets) const {
  return style_ ? style_->loss(h, weight_, targets) : trident::linear_cross_entropy(h, weight_, targets);
}

}  // namespace trident::nn
