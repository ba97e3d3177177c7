// Kernels over many tensors in one launch (the multi_tensor_apply of PyTorch's fused
// optimizers): the global gradient norm's sum of squares and AdamW over every parameter of a
// dtype, instead of a launch (and, for the norm, a host synchronization) per tensor.
#pragma once

#include <cstdint>

#include "kernels/cuda/adamw.cuh"

namespace trident::cuda {

// Sum over the `count` tensors of the squares of their n[k] elements at x[k], in double, in
// a fixed order (chunks of the tensors, then the chunks' sums); synchronizes once.
double launch_sum_of_squares_multi(int dtype, const void* const* x, const int64_t* n, int64_t count);
// AdamW (adamw.cuh's arithmetic) on `count` parameters at once, all with the same step. `out`
// (optional, nullptr: none; f32 parameters only): per parameter n[k] elements of out_dtype
// (bf16 or f16) that also get the updated parameter, rounded to nearest even as a cast rounds.
void launch_adamw_multi(int dtype, void* const* param, const void* const* grad, float* const* m, float* const* v,
                        void* const* out, int out_dtype, const int64_t* n, int64_t count, const AdamWHyper& h);

}  // namespace trident::cuda
