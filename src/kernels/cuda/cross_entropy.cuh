// Cross-entropy fused with log-softmax over (N, V) logits whose rows are ld >= V elements
// apart: the contract of kernels/cpu/cross_entropy.h. Targets are validated (in [0, V) or
// ignore_index).
#pragma once

#include <cstdint>

namespace trident::cuda {

// logsumexp (N) acc_t `=` (0 for ignored rows); returns the sum of the row losses that are not
// ignored (synchronizes: the sum comes back to the host).
double launch_cross_entropy_forward(int dtype, int index_dtype, void* logsumexp, const void* logits,
                                    const void* targets, int64_t N, int64_t V, int64_t ld, int64_t ignore_index);
// dlogits (N, V) = (softmax - onehot) * scale, 0 on ignored rows; dlogits may equal logits.
void launch_cross_entropy_backward(int dtype, int index_dtype, void* dlogits, const void* logits,
                                   const void* logsumexp, const void* targets, int64_t N, int64_t V, int64_t ld,
                                   int64_t ignore_index, double scale);

}  // namespace trident::cuda
