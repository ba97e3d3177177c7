// Differentiable pieces of a mixture-of-experts layer (moe/sparse_moe.h) that the other ops
// do not cover:
//   grouped_linear(x, weights, offsets): x (M, in) sorted by expert, group e's rows times
//     weights[e]^T (ops/grouped_linear.h); gradients for x and every weight (zeros for an
//     expert that got no rows).
//   scatter_add_rows(src, index, rows): (rows, C) with out[index[m]] += src[m], the experts'
//     outputs summed back into their tokens; its backward gathers the rows (embedding's
//     lookup), and gathering rows is embedding(x, index) (autograd/functions/embedding.h),
//     whose backward is this op's forward.
// Backward rules: autograd/derivatives/moe.cc.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace trident {

Tensor grouped_linear(const Tensor& x, const std::vector<Tensor>& weights, const std::vector<int64_t>& offsets);
// index: (M,) of i32, i64 or u16, every value in [0, rows).
Tensor scatter_add_rows(const Tensor& src, const Tensor& index, int64_t rows);

}  // namespace trident
