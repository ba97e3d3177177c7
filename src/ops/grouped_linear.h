// Grouped linear products (no autograd): one matrix of rows split into consecutive groups,
// each multiplied by its own weight, as a mixture-of-experts layer runs its experts on tokens
// sorted by expert (Megatron-Core's GroupedMLP, MegaBlocks' grouped GEMM).
//   grouped_linear(x, weights, offsets): x (M, in), weights[e] (out, in), group e the rows
//     [offsets[e], offsets[e + 1]) of x (offsets has one more entry than weights, starts at
//     0, never decreases and ends at M). Returns (M, out), group e's rows x_e W_e^T.
//   grouped_linear_backward_input(dy, weights, offsets): dx (M, in), group e's rows dy_e W_e.
//   grouped_linear_backward_weights(dy, x, offsets): every group's dW_e (out, in) = dy_e^T x_e;
//     zeros for an empty group (every expert's weight gets a gradient, so data parallelism's buckets fill
//     whatever the routing).
//
// Note [Grouped products]
// A loop of per-expert products pays one launch and one autograd node per expert, and on the
// host each small product splits its few rows over every thread. Here the groups are one op:
// products of one GEMM block run side by side, one per thread (gemm_serial), the larger ones one
// after another over every thread, so a layer with many experts and few tokens each keeps the
// threads busy. Either way the bits are the per-group GEMM's and do not depend on the thread
// count (Note [Deterministic GEMM] in kernels/cpu/matmul.cc). On a device each group is one
// GEMM of the backend (cuBLAS's grouped GEMM is the next step there).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace trident::ops {

Tensor grouped_linear(const Tensor& x, const std::vector<Tensor>& weights, const std::vector<int64_t>& offsets);
Tensor grouped_linear_backward_input(const Tensor& dy, const std::vector<Tensor>& weights,
                                     const std::vector<int64_t>& offsets);
std::vector<Tensor> grouped_linear_backward_weights(const Tensor& dy, const Tensor& x,
                                                   const std::vector<int64_t>& offsets);

}  // namespace trident::ops
