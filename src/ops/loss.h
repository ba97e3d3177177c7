// Loss front ends (no autograd): cross-entropy of logits (..., V) against integer class
// targets, fused with log-softmax (kernels/cpu/cross_entropy). They validate (every target
// must be in [0, V) or equal ignore_index), make inputs contiguous, allocate and dispatch.
// Does not: take class weights, label smoothing or probability targets.
#pragma once

#include <cstdint>
#include <optional>

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

// Note [Fused LM head and cross-entropy]
// The loss of a language model's head, cross_entropy(x w^T, targets), without its logits:
// rows of x go through in chunks of `chunk_rows`; each chunk's logits (chunk_rows, V) are
// computed, reduced to the chunk's losses and, when gradients are wanted, turned in place
// into softmax - onehot, which gives dx's rows (dlogits w) and adds to dw (dlogits^T x).
// Only one chunk of logits exists at a time (instead of the (N,V) logits and their gradient,
// by far the largest activations of a GPT with a 50k vocabulary), and the backward has no
// GEMM left to do: it scales dx and dw.
//   x (N,C) (leading dims fold into N), w (V,C), targets (N) or x's leading shape.
//   chunk_rows 0: automatic (Note [Head chunks]; depends on V only, so results do
//   not depend on the thread count).
// Precision: the loss is in the accumulation dtype (f32 for f32/bf16/f16 inputs, f64 for
// f64), as autocast computes cross-entropy in fp32: a bf16 loss would keep 3 digits. The
// gradients are kept unscaled (softmax - onehot is in [-1, 1]) and dw in the accumulation
// dtype, so fp16 gradients under loss scaling neither underflow here nor lose bits to a
// double rounding: the backward applies grad_scale * upstream and rounds once.
struct LinearCrossEntropyOutput {
  Tensor loss;               // (), acc dtype
  std::optional<Tensor> dx;  // x's shape and dtype, if asked: dloss/dx = grad_scale * dx
  std::optional<Tensor> dw;  // w's shape, acc dtype, if asked: dloss/dw = grad_scale * dw
  double grad_scale;         // 1/count for a mean (0 with no counted rows), 1 for a sum
};
// The rows of one automatic chunk for a V-class head on the host or a device (Note [Head
// chunks]); the planner's memory model reads it too.
int64_t linear_cross_entropy_chunk_rows(int64_t V, bool on_device);
// The rows a V-class head's logits chunks, the weight copy its vocabulary GEMMs read and its dw
// have on a GPU's kernels (V rounded up to their multiple, Note [Padded logits]) or on the host
// (V); the planner's memory model reads it.
int64_t linear_cross_entropy_padded_vocabulary(int64_t V, bool on_device);
LinearCrossEntropyOutput linear_cross_entropy(const Tensor& x, const Tensor& w, const Tensor& targets,
                                              int64_t ignore_index, Reduction reduction, bool want_dx,
                                              bool want_dw, int64_t chunk_rows = 0);

}  // namespace trident::ops
