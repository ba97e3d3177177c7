// Embedding gather and its gradient (a scatter-add of rows) on contiguous buffers: the contract
// of kernels/cpu/embedding.h. Indices are already validated (0 <= index < V).
#pragma once

#include <cstdint>

namespace trident::cuda {

// out (N, C) = weight (V, C) [indices (N)].
void launch_embedding_forward(int dtype, int index_dtype, void* out, const void* weight, const void* indices,
                              int64_t N, int64_t C);
// grad_weight (V, C) `=`: row v sums the grad_out rows n with indices[n] == v; unused rows 0.
void launch_embedding_backward(int dtype, int index_dtype, void* grad_weight, const void* grad_out,
                               const void* indices, int64_t N, int64_t V, int64_t C);

}  // namespace trident::cuda
