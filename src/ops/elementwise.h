// Elementwise arithmetic front ends (no autograd): validate dtypes and devices, broadcast
// shapes (NumPy rules), allocate the output and dispatch to kernels/cpu/binary.
// Binary ops need both operands of the same floating dtype; the result is contiguous.
#pragma once

#include "core/tensor.h"

namespace trident::ops {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
// a += b in place (b broadcasts to a's shape). Bumps a's version. b may have another floating
// dtype (a bf16 gradient added into an f32 sum): the result keeps a's dtype, as PyTorch's
// in-place add does, and b is converted in slices (Note [Mixed-dtype add_]).
void add_(const Tensor& a, const Tensor& b);

// The most elements of b that a mixed-dtype add_ converts at once.
inline constexpr int64_t kMixedAddSliceElements = int64_t{1} << 20;

// a * scale + shift.
Tensor affine(const Tensor& a, double scale, double shift);
inline Tensor mul_scalar(const Tensor& a, double s) { return ops::affine(a, s, 0.0); }
inline Tensor add_scalar(const Tensor& a, double s) { return ops::affine(a, 1.0, s); }
inline Tensor neg(const Tensor& a) { return ops::affine(a, -1.0, 0.0); }

}  // namespace trident::ops
