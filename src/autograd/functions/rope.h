// Differentiable rotary position embedding (LLaMA's RoPE) on q or k viewed per head,
// x (B, T, heads, head_size). See ops/rope.h for shapes and errors and kernels/cpu/rope.h
// for the definition; the backward rotates the gradient back (autograd/derivatives/rope.cc).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace trident {

// theta: the rotary base (10000 in LLaMA 1/2, 500000 in LLaMA 3); pos0: the position of
// x's first token.
Tensor rope(const Tensor& x, double theta = 10000.0, int64_t pos0 = 0);

}  // namespace trident
