// SwiGLU's gate front end (no autograd): h = silu(gate) * up, and its backward, one fused
// pass each on the host (kernels/cpu/swiglu.h). gate and up must match in shape, dtype and
// device (no broadcasting: the MLP's two projections of the same rows); non-contiguous inputs
// are made contiguous; results are contiguous. On a GPU it is silu then mul (the same
// kernels as the unfused ops; no fused device kernel yet).
//
// Note [SwiGLU saves its inputs]
// silu then mul keeps three (B,T,I) tensors for backward: gate (silu's), silu(gate) and up
// (mul's). The fused op keeps gate and up and recomputes silu(gate) in backward (one exp per
// element, next to the exp silu' needs anyway): LLaMA-125M (I = 2048, B*T = 4096) keeps 32 MiB
// less per layer in f32, 400 MiB over its 12 layers, and its MLP's pointwise work goes from
// 5 tensor passes forward and 9 backward to 3 and 5.
#pragma once

#include <utility>

#include "core/tensor.h"

namespace trident::ops {

// h = silu(gate) * up.
Tensor swiglu(const Tensor& gate, const Tensor& up);
// (dgate, dup) of swiglu at (gate, up) for the output gradient dh.
std::pair<Tensor, Tensor> swiglu_backward(const Tensor& dh, const Tensor& gate, const Tensor& up);

}  // namespace trident::ops
