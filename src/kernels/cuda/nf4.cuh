// NF4 weights (core/nf4_layout.h): dequantization, the contract of kernels/cpu/nf4.h (the NF4
// value times the block's scale in fp32, rounded once to the output's dtype).
#pragma once

#include <cstdint>

#include "core/nf4_layout.h"

namespace trident::cuda {

// Weights [begin, end) of `w` into out[0, end - begin).
void launch_nf4_dequantize(int dtype, void* out, const trident::Nf4Data& w, int64_t begin, int64_t end);

}  // namespace trident::cuda
