// Loss front ends (no autograd): cross-entropy of logits (..., V) against integer class
// targets, fused with log-softmax (kernels/cpu/cross_entropy). They validate (every target
// must be in [0, V) or equal ignore_index), make inputs contiguous, allocate and dispatch.
// Does not: take class weights, label smoothing or probability targets.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace trident {

// How per-token losses combine into the scalar loss. It lives in namespace trident, not
// trident::ops, so that argument-dependent lookup on a Reduction argument finds only the
// differentiable trident::cross_entropy: otherwise an unqualified call would be ambiguous.
enum class Reduction {
  kMean,  // sum over the tokens that are not ignored, divided by their count
  kSum,   // sum over the tokens that are not ignored (for gradient accumulation)
};

}  // namespace trident

namespace trident::ops {

struct CrossEntropyOutput {
  Tensor loss;       // (), logits' dtype
  Tensor logsumexp;  // (N) rows of logits, accumulation dtype (f32; f64 for f64 logits),
                     // saved for the backward; 0 on ignored rows
};
// logits (..., V) floating; targets of shape (...) (or flattened to (N)) of dtype i32, i64 or
// u16. Rows whose target equals ignore_index contribute nothing and are not counted. A mean
// over zero counted rows is 0/0 = NaN, as in PyTorch.
CrossEntropyOutput cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                 Reduction reduction);

// dlogits (logits' shape and dtype) from dloss (a 0-dim tensor of logits' dtype), the same
// logits, targets, ignore_index and reduction as the forward, and its logsumexp. Ignored
// rows get zero gradient (also when every row is ignored).
Tensor cross_entropy_backward(const Tensor& dloss, const Tensor& logits, const Tensor& targets,
                              const Tensor& logsumexp, int64_t ignore_index, Reduction reduction);

}  // namespace trident::ops
