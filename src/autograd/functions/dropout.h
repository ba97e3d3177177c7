// Differentiable dropout (nn.functional.dropout): in training, each element is zeroed with
// probability p and the kept ones are scaled by 1 / (1 - p), so the expected value is
// unchanged. The mask comes from `gen`'s counter-based Philox stream (Note [Dropout mask] in
// kernels/cpu/dropout.h): the call reserves ceil(numel / 4) counters, and backward
// regenerates the mask from (seed, offset) instead of storing it.
//   p = 0 or training = false: returns x (a new alias of its storage, no copy) with an
//     identity backward, and draws nothing from gen.
//   p = 1: returns x * 0 (zeros; a NaN stays NaN, as in PyTorch), draws nothing.
//   p outside [0, 1]: an error naming p.
// Backward rule: autograd/derivatives/dropout.cc.
#pragma once

#include "core/rng.h"
#include "core/tensor.h"

namespace trident {

Tensor dropout(const Tensor& x, double p, Generator& gen, bool training = true);

}  // namespace trident
