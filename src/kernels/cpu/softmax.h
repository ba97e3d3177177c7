// Softmax and log_softmax over one axis, forward and backward.
//
// Every buffer is contiguous with shape (outer, n, inner), and the functions act along the
// middle axis n: a tensor of shape S reduced over dim d has outer = prod S[:d], n = S[d],
// inner = prod S[d+1:]. inner == 1 is the common case (the last dim); inner > 1 is handled
// in place, without transposing (see Note [Softmax over a non-last dim] in softmax.cc).
//
//   softmax:     y = exp(x - m) / sum exp(x - m)          m = max over the axis
//   log_softmax: y = (x - m) - log(sum exp(x - m))
// Backward uses only the saved output y (x is not needed):
//   softmax:     dx = y * (dy - sum(dy * y))
//   log_softmax: dx = dy - exp(y) * sum(dy)
// x, y, dy, dx: (outer, n, inner). Outputs must not overlap inputs. Accumulation
// semantics: `=`. Sums over the axis are taken in acc_t<T> (float for f32/bf16/f16, double
// for f64), in an order fixed by the shape alone, so results do not depend on the thread
// count. A slice whose max is +-inf or NaN gives NaN (as in PyTorch); -inf entries next to
// finite ones get probability 0 (masking).
// Not here: masking, scaling or dropout fused into the softmax (attention kernels).
#pragma once

#include <cstdint>

namespace trident::kernels::cpu {

template <class T>
void softmax_forward(T* y, const T* x, int64_t outer, int64_t n, int64_t inner);
template <class T>
void log_softmax_forward(T* y, const T* x, int64_t outer, int64_t n, int64_t inner);
template <class T>
void softmax_backward(T* dx, const T* dy, const T* y, int64_t outer, int64_t n, int64_t inner);
template <class T>
void log_softmax_backward(T* dx, const T* dy, const T* y, int64_t outer, int64_t n, int64_t inner);

}  // namespace trident::kernels::cpu
