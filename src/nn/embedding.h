// Embedding: a lookup table (num, dim); forward gathers rows for integer indices.
#pragma once

#include <memory>

#include "nn/module.h"
#include "nn/parallel_style.h"

namespace trident::nn {

class Embedding : public Module {
 public:
  Embedding(int64_t num, int64_t dim, DType dtype = DType::kF32);
  Tensor forward(const Tensor& indices) const;  // (...) -> (..., dim)
  // The table as a tied output head (GPT-2's LM head): logits h W^T, (..., dim) -> (..., num).
  Tensor attend(const Tensor& h) const;
  // Mean cross-entropy of attend(h) against targets (ignore_index -1), without ever holding
  // the logits (linear_cross_entropy). h (..., dim), targets h's leading shape or (N).
  Tensor attend_loss(const Tensor& h, const Tensor& targets) const;
  const Tensor& weight() const { return weight_; }
  // Set by a parallelism plan that shards this layer (nn/parallel_style.h).
  void set_style(std::shared_ptr<const EmbeddingStyle> style) { style_ = std::move(style); }

 private:
  Tensor weight_;  // (num, dim)
  std::shared_ptr<const EmbeddingStyle> style_;
};

}  // namespace trident::nn
