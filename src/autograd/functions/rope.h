// Differentiable rotary position embedding (LLaMA's RoPE) on q or k viewed per head,
// x (B, T, heads, head_size). See ops/rope.h for shapes and errors and kernels/cpu/rope.h
// for the definition; the backward rotates the gradient back (autograd/derivatives/rope.cc).
#pragma once

#include <cstdint>

#include "core/rope_params.h"
#include "core/tensor.h"

namespace trident {

// params: the rotary base (10000 in LLaMA 1/2, 500000 in LLaMA 3; a plain double) and Llama 3's
// frequency scaling (core/rope_params.h); pos0: the position of x's first token.
Tensor rope(const Tensor& x, const RopeParams& params = RopeParams(), int64_t pos0 = 0);
// Token (b, t) at position positions[b, t]: (B, T) i64 on x's device (packed documents'
// position ids, ops/documents.h).
Tensor rope(const Tensor& x, const RopeParams& params, const Tensor& positions);

}  // namespace trident
