// Differentiable reductions. dims may be negative; an empty list reduces every dim.
// Backward rules: autograd/derivatives/reduce.cc.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace trident {

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);

}  // namespace trident
