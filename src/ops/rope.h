// Rotary position embedding front end (no autograd): x (B, T, H, D) tokens-first, as a
// q/k projection viewed per head, D even; token t has position pos0 + t (pos0: where this
// piece of the sequence starts, e.g. under sequence parallelism or cached decoding).
// Definition and accuracy: kernels/cpu/rope.h. `inverse` rotates back: the backward.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace trident::ops {

Tensor rope(const Tensor& x, double theta, int64_t pos0, bool inverse = false);

}  // namespace trident::ops
