// Reductions (no autograd). dims may be negative; an empty dims list reduces every dim.
// Sums accumulate in double; results are independent of the thread count.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace trident::ops {

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
// Sums x down to `shape`, the inverse of broadcasting `shape` to x's shape: the gradient of
// a broadcast operand. Returns x itself when the shapes already match.
Tensor sum_to(const Tensor& x, const Shape& shape);

}  // namespace trident::ops
