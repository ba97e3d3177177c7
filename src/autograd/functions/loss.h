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

// cross_entropy(linear(x, w), targets) without the logits (Note [Fused LM head and
// cross-entropy] in ops/loss.h): x (..., C), w (V, C), targets x's leading shape or (N).
// Gradients for x and w are computed in the forward, chunk by chunk, and only scaled by the
// backward; chunk_rows 0 picks the chunk size from V. The loss is f32 for f32/bf16/f16
// inputs (f64 for f64). Differentiable in x and w.
Tensor linear_cross_entropy(const Tensor& x, const Tensor& w, const Tensor& targets, int64_t ignore_index = -1,
                            Reduction reduction = Reduction::kMean, int64_t chunk_rows = 0);

}  // namespace trident
