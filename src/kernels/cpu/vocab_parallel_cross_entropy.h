// The local passes of vocabulary-parallel cross-entropy (Megatron-LM's): each tensor-parallel
// rank holds columns [begin, begin + V) of every row of the logits (N rows, f32), and the
// ranks combine their per-row results with two all-reduces in between (parallel/tp_collectives):
//   1. row_max (N)    = the max of this rank's columns; all-reduced with max over the ranks.
//   2. sums (2, N)    = [sum_j exp(l_ij - row_max_i),  l_i,target - row_max_i if this rank holds
//                       the target's column, else 0], in double; all-reduced with sum. The loss
//                       of row i is then log(sums[0, i]) - sums[1, i].
//   3. grad (N, V)    = (exp(l_ij - row_max_i) / sums[0, i] - [begin + j == target_i]) * scale,
//                       0 on ignored rows.
// Rows whose target equals ignore_index are ignored (pass 2 still forms their sums). Targets
// are i64 and not validated here. Each row is computed by one thread in a fixed order, so
// results do not depend on the thread count.
#pragma once

#include <cstdint>

namespace trident::kernels::cpu {

void vocab_parallel_row_max(float* row_max, const float* logits, int64_t N, int64_t V);
void vocab_parallel_sums(double* sums, const float* logits, const float* row_max, const int64_t* targets, int64_t N,
                         int64_t V, int64_t begin);
void vocab_parallel_backward(float* grad, const float* logits, const float* row_max, const double* sums,
                             const int64_t* targets, int64_t N, int64_t V, int64_t begin, int64_t ignore_index,
                             double scale);

}  // namespace trident::kernels::cpu
