// Reference normalizations over the last dim, written as the textbook formulas in float64:
//   layernorm(x) = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias   (biased variance)
//   rmsnorm(x)   = x / sqrt(mean(x^2) + eps) * weight
// x (..., C); weight, bias (C) or absent (treated as ones / zeros). No caching, no speed.
#pragma once

#include <optional>

#include "kernels/reference/array.h"

namespace trident::reference {

Array layernorm(const Array& x, const std::optional<Array>& weight,
                const std::optional<Array>& bias, double eps);
Array rmsnorm(const Array& x, const std::optional<Array>& weight, double eps);

}  // namespace trident::reference
