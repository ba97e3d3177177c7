// Cross-entropy of logits against integer class targets, fused with log-softmax:
//   loss_r = logsumexp(logits[r, :]) - logits[r, targets[r]]
//   dlogits[r, j] = (softmax(logits[r, :])_j - [j == targets[r]]) * scale
// Rows whose target equals ignore_index contribute no loss and get a zero gradient.
//
// The forward reads each row once (an online max / sum of exponentials, chunk by chunk),
// caches the row's logsumexp (N) in acc_t<T> and never forms probabilities. The backward
// rebuilds softmax from the logits and the cached logsumexp and writes the gradient
// directly, in one pass per row. Math in acc_t<T> (float for f32/bf16/f16, double for f64),
// rounded once on store; float exponentials are math::exp, a vectorizable polynomial
// accurate to 0.94 ulp (Note [Vectorizable float math] in fast_math.h). The sum of row
// losses is in double, combined in a fixed order, so the result does not depend on the
// thread count.
//
// Accumulation semantics: `=` (logsumexp and dlogits are overwritten).
// Targets are not validated here: every target must be in [0, V) or equal ignore_index
// (the front end checks). Index type I is int32_t, int64_t or uint16_t.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace trident::kernels::cpu {

// logsumexp (N) = cached for backward (0 for ignored rows); logits (N,V); targets (N).
// Returns the sum of loss_r over the rows that are not ignored.
template <class T, class I>
double cross_entropy_forward(acc_t<T>* logsumexp, const T* logits, const I* targets, int64_t N,
                             int64_t V, int64_t ignore_index);

// dlogits (N,V) = (softmax - onehot) * scale, zero on ignored rows; logits (N,V);
// logsumexp (N) as cached by the forward; targets (N). scale is the upstream gradient of the
// summed loss per row (g, or g / count for a mean). dlogits may be logits (in place).
template <class T, class I>
void cross_entropy_backward(T* dlogits, const T* logits, const acc_t<T>* logsumexp,
                            const I* targets, int64_t N, int64_t V, int64_t ignore_index,
                            double scale);

}  // namespace trident::kernels::cpu
