// Elementwise binary arithmetic with broadcasting: out = a (op) b.
// Shapes: every pointer is a strided view over the same `shape`; a broadcast dim has
// stride 0. `out` may alias `a` exactly (in-place add_). Accumulation semantics: `=`.
// T is float, double, bf16 or f16; math is done in acc_t<T> and rounded once on store.
#pragma once

#include <cstdint>

#include "core/shape.h"

namespace trident::kernels::cpu {

enum class BinaryOp { kAdd, kSub, kMul, kDiv };

template <class T>
void binary_forward(BinaryOp op, T* out, const Strides& out_strides, const T* a,
                    const Strides& a_strides, const T* b, const Strides& b_strides,
                    const Shape& shape);

// out = alpha * a + beta * b over contiguous buffers of n elements (out may alias a or b).
template <class T>
void axpby(T* out, const T* a, const T* b, double alpha, double beta, int64_t n);

// out = a * scale + shift, contiguous (out may alias a).
template <class T>
void scale_shift(T* out, const T* a, double scale, double shift, int64_t n);

}  // namespace trident::kernels::cpu
