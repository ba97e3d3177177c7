// Differentiable losses: cross-entropy of logits (..., V) against integer class targets,
// fused with log-softmax (the probabilities are never materialized). See ops/loss.h for
// shapes and errors; backward rule in autograd/derivatives/loss.cc.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/loss.h"  // Reduction

namespace trident {

// The 0-dim loss: per row logsumexp(logits) - logits[target], over the rows whose target is
// not ignore_index, averaged over those rows (kMean; NaN when there are none, as in PyTorch)
// or summed (kSum). targets (...) or (N): i32, i64 or u16, each in [0, V) or ignore_index.
// Differentiable in logits only.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -1,
                     Reduction reduction = Reduction::kMean);

}  // namespace trident
