// Sum over a set of dims. in: a strided view of `shape`; out: contiguous, holding the kept
// dims in order (the reduced dims removed). Accumulates in double, whatever T is, and each
// output is summed by one thread in a fixed order, so results do not depend on the thread
// count. Accumulation semantics: `=` (out is overwritten), scaled by `scale` (1/n for mean).
#pragma once

#include <cstdint>

#include "core/shape.h"

namespace trident::kernels::cpu {

template <class T>
void sum_forward(T* out, const T* in, const Shape& shape, const Strides& strides,
                 const bool* reduce_dim, double scale);

}  // namespace trident::kernels::cpu
