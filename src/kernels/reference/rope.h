// Reference rotary position embedding in float64 (kernels/cpu/rope.h gives the definition):
// x (B, T, H, D), D even, positions pos0 + t, or positions[b * T + t] when given.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/reference/array.h"

namespace trident::reference {

// With Llama 3's scaling when factor > 0 (core/rope_params.h's definition, written out again
// here after Hugging Face's _compute_llama3_parameters).
Array rope(const Array& x, double theta, int64_t pos0, double factor = 0.0, double low_freq_factor = 1.0,
           double high_freq_factor = 4.0, double original_max_position = 8192.0,
           const std::vector<int64_t>& positions = {});

}  // namespace trident::reference
