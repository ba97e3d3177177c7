// NF4 weights on the host (core/nf4_layout.h): the code of a value, and dequantization.
#pragma once

#include <cstdint>

#include "core/nf4_layout.h"

namespace trident::kernels::cpu {

// The index of the NF4 value nearest to v (ties to the larger; outside [-1, 1], the end value).
// In double, so that the choice is the exact nearest value of weight / absmax.
int nf4_code(double v);

// Weights [begin, end) of the flattened NF4 weight `w`, dequantized into out[0, end - begin):
// kNf4Values[code] x the block's scale in fp32, rounded once to T. Serial: callers split.
template <class T>
void nf4_dequantize(const Nf4Data& w, int64_t begin, int64_t end, T* out);

}  // namespace trident::kernels::cpu
