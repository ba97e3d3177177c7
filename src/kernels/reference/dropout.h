// Reference dropout: the mask of ops/dropout.h recomputed element by element, straight from
// its definition (Note [Dropout mask] in kernels/cpu/dropout.h):
//   counter(i) = offset + i / 4,  word(i) = i % 4,
//   u(i) = uniform_from_bits(philox4x32(seed, counter(i))[word(i)])   (24 bits, in [0, 1)),
//   out[i] = x[i] * (u(i) >= p ? 1 / (1 - p) : 0).
// Element i is the row-major (logical) index into x. This uses core/rng.h's Philox, which
// sits below the oracle; everything else is written out here.
#pragma once

#include <cstdint>

#include "kernels/reference/array.h"

namespace trident::reference {

Array dropout(const Array& x, double p, uint64_t seed, uint64_t offset);

}  // namespace trident::reference
