// Vocabulary-parallel cross-entropy's local passes on the GPU: the contract of
// kernels/cpu/vocab_parallel_cross_entropy.h (f32 logits, i64 targets, sums in double).
#pragma once

#include <cstdint>

namespace trident::cuda {

void launch_vocab_parallel_row_max(float* row_max, const float* logits, int64_t N, int64_t V);
void launch_vocab_parallel_sums(double* sums, const float* logits, const float* row_max, const int64_t* targets,
                                int64_t N, int64_t V, int64_t begin);
void launch_vocab_parallel_backward(float* grad, const float* logits, const float* row_max, const double* sums,
                                    const int64_t* targets, int64_t N, int64_t V, int64_t begin,
                                    int64_t ignore_index, double scale);

}  // namespace trident::cuda
