#include "nn/embedding.h"

#include "autograd/functions.h"
#include "core/factory.h"

namespace trident::nn {

Tensor EmbeddingInner::lookup(const Tensor& ids, const LayerParams& p) const {
  return next(&EmbeddingWrapper::lookup, &Embedding::compute_lookup, ids, p);
}

Tensor EmbeddingInner::logits(const Tensor& h, const LayerParams& p) const {
  return next(&EmbeddingWrapper::logits, &Embedding::compute_logits, h, p);
}

Tensor EmbeddingInner::loss(const Tensor& h, const LayerParams& p, const Tensor& targets) const {
  return next(&EmbeddingWrapper::loss, &Embedding::compute_loss, h, p, targets);
}

Tensor EmbeddingWrapper::loss(const Tensor& h, const LayerParams& p, const Tensor& targets,
                              const EmbeddingInner& inner) const {
  return trident::cross_entropy(logits(h, p, inner), targets);
}

Embedding::Embedding(int64_t num, int64_t dim, DType dtype)
    : weight_(register_parameter("weight", zeros({num, dim}, dtype))) {}

Tensor Embedding::forward(const Tensor& indices) const {
  return wrapped() ? EmbeddingInner(*this, 0).lookup(indices, {weight_}) : compute_lookup(indices, {weight_});
}

Tensor Embedding::attend(const Tensor& h) const {
  return wrapped() ? EmbeddingInner(*this, 0).logits(h, {weight_}) : compute_logits(h, {weight_});
}

Tensor Embedding::attend_loss(const Tensor& h, const Tensor& targets) const {
  return wrapped() ? EmbeddingInner(*this, 0).loss(h, {weight_}, targets) : compute_loss(h, {weight_}, targets);
}

Tensor Embedding::compute_lookup(const Tensor& ids, const LayerParams& p) const {
  return trident::embedding(p.weight, ids);
}

Tensor Embedding::compute_logits(const Tensor& h, const LayerParams& p) const {
  // One GEMM against the table itself: linear() takes W (out, in) = (num, dim).
  return trident::linear(h, p.weight);
}

Tensor Embedding::compute_loss(const Tensor& h, const LayerParams& p, const Tensor& targets) const {
  return trident::linear_cross_entropy(h, p.weight, targets);
}

}  // namespace trident::nn
