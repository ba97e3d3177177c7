// Dropout front ends (no autograd): the mask is given by (seed, offset), not drawn here, so
// these are pure functions; the differentiable trident::dropout (autograd/functions/dropout.h)
// reserves the counters from a Generator and handles training=false.
//   dropout(x, p, seed, offset): x * mask / (1 - p) with the mask of Note [Dropout mask]
//     (kernels/cpu/dropout.h); x floating, any layout (element i is x's row-major index);
//     p in [0, 1]; p = 1 gives x * 0 (zeros, NaN propagates) without drawing. Contiguous.
//   dropout_backward(grad_out, p, seed, offset): the same map applied to the gradient.
// The mask is never stored.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace trident::ops {

Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset);
Tensor dropout_backward(const Tensor& grad_out, double p, uint64_t seed, uint64_t offset);
// Philox counters a dropout mask over `numel` elements uses.
int64_t dropout_counters(int64_t numel);
// Throws unless 0 <= p <= 1 (NaN included), naming `what` and p.
void check_dropout_probability(double p, const char* what);

}  // namespace trident::ops
