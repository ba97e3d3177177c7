// Embedding: a lookup table (num, dim); forward gathers rows for integer indices, and the
// table can serve as a tied output head (logits h W^T, and their loss fused).
// The layer carries a stack of EmbeddingWrappers (nn/wrapper.h); without one it is exactly its
// single-device self.
#pragma once

#include "nn/wrapper.h"

namespace trident::nn {

class Embedding;
class EmbeddingWrapper;

// The rest of an embedding's stack below one wrapper (nn/wrapper.h's StackCursor).
class EmbeddingInner : public StackCursor<EmbeddingInner, Embedding, EmbeddingWrapper> {
 public:
  using StackCursor::StackCursor;
  Tensor lookup(const Tensor& ids, const LayerParams& p) const;                         // (...) -> (..., dim)
  Tensor logits(const Tensor& h, const LayerParams& p) const;                           // (..., dim) -> (..., num)
  Tensor loss(const Tensor& h, const LayerParams& p, const Tensor& targets) const;  // mean, ignore_index -1
};

class EmbeddingWrapper : public Wrapper {
 public:
  virtual Tensor lookup(const Tensor& ids, const LayerParams& p, const EmbeddingInner& inner) const = 0;
  virtual Tensor logits(const Tensor& h, const LayerParams& p, const EmbeddingInner& inner) const = 0;
  // cross_entropy(logits(h)), as LinearWrapper::loss: a wrapper with a loss of its own (the
  // vocabulary-parallel head) overrides it.
  virtual Tensor loss(const Tensor& h, const LayerParams& p, const Tensor& targets, const EmbeddingInner& inner) const;
};

class Embedding final : public WrappedModule<EmbeddingWrapper> {
 public:
  Embedding(int64_t num, int64_t dim, DType dtype = DType::kF32);
  Tensor forward(const Tensor& indices) const;  // (...) -> (..., dim)
  // The table as a tied output head (GPT-2's LM head): logits h W^T, (..., dim) -> (..., num).
  Tensor attend(const Tensor& h) const;
  // Mean cross-entropy of attend(h) against targets (ignore_index -1), without ever holding
  // the logits (linear_cross_entropy) unless a wrapper changes them. h (..., dim), targets h's
  // leading shape or (N).
  Tensor attend_loss(const Tensor& h, const Tensor& targets) const;
  const Tensor& weight() const { return weight_; }

  // The single-device computations with parameters `p`, which the bottom of the stack runs.
  Tensor compute_lookup(const Tensor& ids, const LayerParams& p) const;
  Tensor compute_logits(const Tensor& h, const LayerParams& p) const;
  Tensor compute_loss(const Tensor& h, const LayerParams& p, const Tensor& targets) const;

 private:
  Tensor weight_;  // (num, dim)
};

}  // namespace trident::nn
