// Pointwise functions: exp, log, tanh, sqrt, pow, GELU (exact and tanh form) and SiLU, with
// their backward kernels; and, in namespace math, the scalar sigmoid, GELU and SiLU (and
// their derivatives) that the kernels are made of.
//
// Kernels work on contiguous buffers of n elements; every argument below has shape (n).
// out may alias x, and dx may alias dy (each element is read before it is written).
// Accumulation semantics: `=` (outputs are overwritten). T is float, double, bf16 or f16;
// math is done in acc_t<T> (float, or double for f64) and rounded once on store.
// Backward kernels take the tensor that makes the derivative cheapest: the output y for
// exp (y), tanh (1 - y^2) and sqrt (1 / 2y), the input x for the rest.
//
// The math:: functions are inline so that loops calling them vectorize (g++ -O3
// -march=native), and so that fused kernels elsewhere (bias + GELU) can reuse them. They
// are built on the elementary functions of kernels/cpu/fast_math.h (math::exp, log, tanh,
// normal_cdf): polynomial approximations accurate to a few ulp for float (see
// Note [Vectorizable float math] there), the C library for double.
// Not here: anything with more than one tensor input (kernels/cpu/binary.h), reductions.
#pragma once

#include <cstdint>

#include "kernels/cpu/fast_math.h"

namespace trident::kernels::cpu {

template <class T>
void exp_forward(T* out, const T* x, int64_t n);
template <class T>
void log_forward(T* out, const T* x, int64_t n);
template <class T>
void tanh_forward(T* out, const T* x, int64_t n);
template <class T>
void sqrt_forward(T* out, const T* x, int64_t n);
// out = x^exponent. Negative x needs an integer exponent (else NaN, as std::pow).
template <class T>
void pow_forward(T* out, const T* x, double exponent, int64_t n);
template <class T>
void gelu_tanh_forward(T* out, const T* x, int64_t n);
template <class T>
void gelu_forward(T* out, const T* x, int64_t n);
template <class T>
void silu_forward(T* out, const T* x, int64_t n);

// dx = dy * f'(x), from the saved output y = f(x) or the input x as named.
template <class T>
void exp_backward(T* dx, const T* dy, const T* y, int64_t n);
template <class T>
void log_backward(T* dx, const T* dy, const T* x, int64_t n);
template <class T>
void tanh_backward(T* dx, const T* dy, const T* y, int64_t n);
template <class T>
void sqrt_backward(T* dx, const T* dy, const T* y, int64_t n);
// dx = dy * exponent * x^(exponent - 1); exactly 0 when exponent == 0 (even at x = 0).
template <class T>
void pow_backward(T* dx, const T* dy, const T* x, double exponent, int64_t n);
template <class T>
void gelu_tanh_backward(T* dx, const T* dy, const T* x, int64_t n);
template <class T>
void gelu_backward(T* dx, const T* dy, const T* x, int64_t n);
template <class T>
void silu_backward(T* dx, const T* dy, const T* x, int64_t n);

namespace math {

template <class Acc>
[[gnu::always_inline]] inline Acc sigmoid(Acc x) {
  return Acc(1) / (Acc(1) + math::exp(-x));
}

// Note [GELU tanh as a sigmoid]
// 0.5 x (1 + tanh(u)) = x sigmoid(2u) exactly, with u = sqrt(2/pi) (x + 0.044715 x^3).
// The sigmoid form needs one exp and no cancellation: 1 + tanh(u) loses all relative
// accuracy for negative x, x / (1 + e^{-2u}) keeps it; and it saturates cleanly to x and -0.
inline constexpr double kGeluTanhScale = 2 * 0.797884560802865406;  // 2 sqrt(2/pi)
inline constexpr double kGeluTanhCubic = 0.044715;

template <class Acc>
[[gnu::always_inline]] inline Acc gelu_tanh(Acc x) {
  const Acc u2 = Acc(kGeluTanhScale) * (x + Acc(kGeluTanhCubic) * x * x * x);
  return x / (Acc(1) + math::exp(-u2));
}
// d/dx x s(2u) = s + x s (1 - s) 2u', with s = sigmoid(2u), 2u' = 2 sqrt(2/pi) (1 + 3c x^2).
// 1 - s is computed as sigmoid(-2u), not by subtraction, which would cancel where s ~ 1.
template <class Acc>
[[gnu::always_inline]] inline Acc gelu_tanh_grad(Acc x) {
  const Acc x2 = x * x;
  const Acc u2 = Acc(kGeluTanhScale) * (x + Acc(kGeluTanhCubic) * x2 * x);
  const Acc s = sigmoid(u2), one_minus_s = sigmoid(-u2);
  const Acc du2 = Acc(kGeluTanhScale) * (Acc(1) + Acc(3 * kGeluTanhCubic) * x2);
  return s + x * s * one_minus_s * du2;
}

template <class Acc>
[[gnu::always_inline]] inline Acc gelu(Acc x) {
  return x * normal_cdf(x);
}
// d/dx x Phi(x) = Phi(x) + x phi(x), phi(x) = e^{-x^2/2} / sqrt(2 pi).
template <class Acc>
[[gnu::always_inline]] inline Acc gelu_grad(Acc x) {
  return normal_cdf(x) + x * Acc(0.398942280401432678) * math::exp(Acc(-0.5) * x * x);
}

template <class Acc>
[[gnu::always_inline]] inline Acc silu(Acc x) {
  return x / (Acc(1) + math::exp(-x));
}
// d/dx x s(x) = s + x s (1 - s) = s (1 + x s(-x)), with 1 - s = s(-x) as in gelu_tanh_grad.
template <class Acc>
[[gnu::always_inline]] inline Acc silu_grad(Acc x) {
  return sigmoid(x) * (Acc(1) + x * sigmoid(-x));
}

}  // namespace math
}  // namespace trident::kernels::cpu
