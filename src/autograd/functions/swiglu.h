// Differentiable SwiGLU gate: silu(gate) * up in one fused pass (ops/swiglu.h), LLaMA's MLP.
// Backward rule: autograd/derivatives/swiglu.cc.
#pragma once

#include "core/tensor.h"

namespace trident {

// silu(gate) * up; gate and up of one shape.
Tensor swiglu(const Tensor& gate, const Tensor& up);

}  // namespace trident
