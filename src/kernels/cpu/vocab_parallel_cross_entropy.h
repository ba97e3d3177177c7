// The local passes of vocabulary-parallel cross-entropy (Megatron-LM's): each tensor-parallel
// rank holds columns [begin, begin + V) of every row of the logits (N rows, f32), and the
// ranks combine their per-row results with two all-reduces in between (parallel/tp_collectives):
//   1. row_max (N)    = the max of this rank's columns; all-reduced with max over the ranks.
//   2. sums (2, N)    = [sum_j exp(l_ij - row_max_i),  l_i,target - row_max_i if this rank holds
//                       the target's column, else 0], stored in double; all-reduced with sum.
//                       The loss of row i is then log(sums[0, i]) - sums[1, i].
//   3. grad (N, V)    = (exp(l_ij - row_max_i) / sums[0, i] - [begin + j == target_i]) * scale,
//                       0 on ignored rows.
// The exponentials are float math::exp, as in the local loss (kernels/cpu/cross_entropy.cc),
// summed in double lanes (Note [Lane sums]), and the backward is e^(l - lse) * scale: one
// vectorized exp per logit and pass, 1.3 ns per logit forward and backward where std::exp in
// double took 11 (bench/loss_bench, Zen 4, one thread).
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
