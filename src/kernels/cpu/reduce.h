// Sum over a set of dims. in: a strided view of `shape`; out: contiguous, holding the kept
// dims in order (the reduced dims removed). Accumulates in double, whatever T is, and each
// output is summed by one thread in a fixed order, so results do not depend on the thread
// count. Accumulation semantics: `=` (out is overwritten), scaled by `scale` (1/n for mean).
// And the sum of squares of a contiguous buffer (gradient-norm clipping), also in double.
#pragma once

#include <cstdint>

#include "core/shape.h"

namespace trident::kernels::cpu {

template <class T>
void sum_forward(T* out, const T* in, const Shape& shape, const Strides& strides,
                 const bool* reduce_dim, double scale);

// sum of x[i]^2 over i in [0, n), in double: fixed chunks of 32768 elements (one thread each),
// each summed in the lanes of Note [Lane sums] (row_reduce.h), the chunks' sums added in
// order. Independent of the thread count. A chunk summed as `s += x*x` was one dependent
// double add per element: LLaMA-125M's 100M gradients took ~100-200 ms of a step's clipping
// on 2 Zen 4 cores; the lanes vectorize.
template <class T>
double sum_of_squares(const T* x, int64_t n);

}  // namespace trident::kernels::cpu
