// Embedding front ends (no autograd): validate, make inputs contiguous, dispatch to
// kernels/cpu/embedding.
//   embedding(weight, indices): weight (V, C) of a floating dtype, any layout; indices of any
//     shape (up to 7 dims), i32, i64 or u16, any layout, every value in [0, V) (checked: the
//     error names the first bad value, its position and V). Returns (indices..., C),
//     contiguous, of weight's dtype.
//   embedding_backward(grad_out, indices, num_weights): the weight's gradient (V, C), the
//     sum of grad_out rows per index (deterministic; see kernels/cpu/embedding.cc).
// Not supported: padding_idx, max_norm, sparse gradients (PyTorch's extra options).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace trident::ops {

Tensor embedding(const Tensor& weight, const Tensor& indices);
Tensor embedding_backward(const Tensor& grad_out, const Tensor& indices, int64_t num_weights);

}  // namespace trident::ops
