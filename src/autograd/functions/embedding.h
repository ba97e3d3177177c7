// Differentiable embedding lookup (nn.functional.embedding): weight (V, C) floating, indices
// of any shape (i32, i64 or u16, every value in [0, V)) -> (indices..., C). Only the weight
// gets a gradient: a deterministic scatter-add of the output gradient into (V, C). See
// ops/embedding.h for what is validated. Backward rule: autograd/derivatives/embedding.cc.
#pragma once

#include "core/tensor.h"

namespace trident {

Tensor embedding(const Tensor& weight, const Tensor& indices);

}  // namespace trident
