// Softmax and log_softmax front ends (no autograd), over one dim (negative dims count from
// the end; a 0-dim tensor is treated as one element). They validate dtype and dim, make the
// input contiguous, and dispatch to kernels/cpu/softmax, which handles any dim in place
// (no transposes). The result is contiguous, with x's shape and dtype.
// Backward takes the forward's output (not its input), as the kernels do.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace trident::ops {

Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);
// grad: gradient of the output; out: the forward's result; dim: the forward's dim.
Tensor softmax_backward(const Tensor& grad, const Tensor& out, int64_t dim);
Tensor log_softmax_backward(const Tensor& grad, const Tensor& out, int64_t dim);

}  // namespace trident::ops
