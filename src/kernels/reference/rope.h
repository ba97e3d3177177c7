// Reference rotary position embedding in float64 (kernels/cpu/rope.h gives the definition):
// x (B, T, H, D), D even, positions pos0 + t.
#pragma once

#include <cstdint>

#include "kernels/reference/array.h"

namespace trident::reference {

Array rope(const Array& x, double theta, int64_t pos0);

}  // namespace trident::reference
