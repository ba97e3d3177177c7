// Differentiable softmax and log_softmax over one dim (default the last). Numerically
// stable (the max is subtracted) and accumulated in float (double for f64).
// Backward rules: autograd/derivatives/softmax.cc; they use the saved output only.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace trident {

Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);

}  // namespace trident
