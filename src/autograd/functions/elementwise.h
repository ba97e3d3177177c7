// Differentiable elementwise arithmetic (broadcasting, same-dtype operands).
// Backward rules: autograd/derivatives/elementwise.cc.
#pragma once

#include "core/tensor.h"

namespace trident {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
// a * scale + shift with scalar scale and shift.
Tensor affine(const Tensor& a, double scale, double shift);
inline Tensor neg(const Tensor& a) { return affine(a, -1.0, 0.0); }

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
inline Tensor operator*(const Tensor& a, double s) { return affine(a, s, 0.0); }
inline Tensor operator*(double s, const Tensor& a) { return affine(a, s, 0.0); }
inline Tensor operator/(const Tensor& a, double s) { return affine(a, 1.0 / s, 0.0); }
inline Tensor operator+(const Tensor& a, double s) { return affine(a, 1.0, s); }
inline Tensor operator-(const Tensor& a, double s) { return affine(a, 1.0, -s); }

}  // namespace trident
