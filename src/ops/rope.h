// Rotary position embedding front end (no autograd): x (B, T, H, D) tokens-first, as a
// q/k projection viewed per head, D even; token t has position pos0 + t (pos0: where this
// piece of the sequence starts, e.g. under sequence parallelism or cached decoding).
// Definition and accuracy: kernels/cpu/rope.h. `inverse` rotates back: the backward.
#pragma once

#include <cstdint>

#include "core/rope_params.h"
#include "core/tensor.h"

namespace trident::ops {

// params: the base and Llama 3's scaling (core/rope_params.h); a plain double is the base.
Tensor rope(const Tensor& x, const RopeParams& params, int64_t pos0, bool inverse = false);
// Token (b, t) at position positions[b, t] instead: (B, T) i64 on x's device, each >= 0 (the
// position ids of packed documents, ops/documents.h).
Tensor rope(const Tensor& x, const RopeParams& params, const Tensor& positions, bool inverse = false);

}  // namespace trident::ops
