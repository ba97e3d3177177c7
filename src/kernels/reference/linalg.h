// Reference matrix products: naive triple loops.
#pragma once

#include <optional>

#include "kernels/reference/array.h"

namespace trident::reference {

// a (..., M, K) @ b (..., K, N), batch dims broadcast.
Array matmul(const Array& a, const Array& b);
// x (..., in) @ w^T + bias; w (out, in).
Array linear(const Array& x, const Array& w, const std::optional<Array>& bias);

}  // namespace trident::reference
