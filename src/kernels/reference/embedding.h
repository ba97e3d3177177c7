// Reference embedding lookup: output row n is row indices[n] of the weight, by an explicit
// loop over tokens. Indices are integer values stored as doubles (as reference::Array holds
// every input), of any shape. The gradient is checked against finite differences of this
// forward, so there is no reference backward.
#pragma once

#include "kernels/reference/array.h"

namespace trident::reference {

// weight (V, C), indices (...) with values in [0, V) -> (..., C).
Array embedding(const Array& weight, const Array& indices);

}  // namespace trident::reference
