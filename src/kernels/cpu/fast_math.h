// Scalar float and double math functions written so that loops calling them vectorize
// (g++ -O3 -march=native, no -ffast-math): math::exp, log, tanh and normal_cdf (the standard
// normal CDF), and the bit-mask select they are built with. Used by the pointwise kernels
// (GELU, SiLU, ...), softmax, cross_entropy and attention.
// The float versions are polynomial approximations accurate to about one ulp (see
// Note [Vectorizable float math]); the double versions call the C library, because f64 is
// the type tests compare against and must be as accurate as the reference.
// Not here: functions of tensors (kernels/cpu/pointwise.h), anything needing -ffast-math.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace trident::kernels::cpu::math {

// Note [Vectorizable float math]
// Why not std::exp? glibc's vector versions (libmvec) are only used under -ffast-math, so
// a loop calling std::exp/tanh/erf makes one scalar library call per element: GELU over 16M
// floats took 380 ms with std::tanh and 160 ms with std::erf, against 19 ms and 40 ms with
// the functions below (one core, AVX2), which are written to vectorize; the cross-entropy
// loss over the GPT-2 vocabulary (nearly all of its time is exponentials) runs about 6x
// faster with a polynomial exp than with std::exp (one thread).
//   * exp: Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, degree-7 Taylor polynomial
//     for e^r (truncation error 5e-9), 2^n built in the exponent bits as two factors so that
//     results down to the subnormal range and overflow to inf come out right.
//   * log: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log(1+f) = f - f^2/2 + f^3 P(f).
//   * tanh: x + x^3 P(x^2) below |x| = 0.625, 1 - 2 / (e^{2|x|} + 1) above.
//   * normal_cdf: (1 + erf(x/sqrt2)) / 2 with erf(z) = z P(z^2) for |z| < 1; above,
//     erfc(|z|) = e^{-z^2} / |z| * Q(1/|z|), which keeps relative accuracy in the lower
//     tail (where 1 + erf would cancel) until e^{-z^2} underflows.
// The polynomials are Chebyshev interpolants computed with mpmath.chebyfit in 30-digit
// arithmetic (P, Q on the intervals above; Q in the variable s = (1/|z| - 0.55) / 0.45 on
// [0.1, 1]); each approximation error is below 2e-9 relative, far under float's unit
// roundoff 6e-8. Measured against double-precision libm (over every float for log and tanh
// and for exp on [-104, 88], every 61st bit pattern for normal_cdf): exp 0.94 ulp (0.85
// ulp of the smallest subnormal where the result is subnormal), log 0.83 ulp, tanh 1.4 ulp;
// normal_cdf 11 ulp for x >= -4 (0.5 + erf/2 cancels near x = -1.4; absolute error
// <= 1.1e-7 everywhere), and in the far lower tail the rounding of x^2 costs about x^2/2 u
// relative (62 ulp at x = -11, where Phi = 3e-30). NaN propagates, exp(-inf) = 0,
// exp(inf) = inf, log(0) = -inf, log(x < 0) = NaN (tests/ops/pointwise_test.cc).
// Why not Cephes' expf (a degree-6 minimax polynomial, 2^n as one factor)? Measured the same
// way it is 1.02 ulp, and one factor 2^n cannot go below 2^-126, so results below about
// e^-87.3 (the smallest normal float) must be flushed to 0 instead of rounded to a subnormal.
//
// Note [Branch-free selects]
// g++ refuses to vectorize `c ? a : b` when a or b is computed with floating-point
// arithmetic (under the default -ftrapping-math it will not evaluate both arms), so the
// piecewise functions compute both pieces and pick one with a bit mask. And they are all
// always_inline: in a large kernel g++'s inliner otherwise gives up on them, and a loop
// that calls math::exp out of line does not vectorize (gelu_backward ran 10x slower).
// Inlined, their bits also depend on the caller: g++ fuses a * b + c into FMAs across the
// inlined code (-ffp-contract=fast, its C++ default). Rewriting exp's clamps with
// std::min/max gives the same bits for every float on its own, but changed silu_backward
// (which calls exp(x) and exp(-x)) by 1-2 ulp, as g++ contracted the inlined code
// differently. So check changes here in the kernels that use them, not only function by
// function.

[[gnu::always_inline]] inline float select(bool c, float a, float b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(c);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & mask) |
                              (std::bit_cast<uint32_t>(b) & ~mask));
}

[[gnu::always_inline]] inline float exp(float x) {
  // Beyond these bounds e^x rounds to 0 or inf anyway; clamping keeps n in [-150, 128].
  x = select(x > 89.0f, 89.0f, x);
  x = select(x < -104.0f, -104.0f, x);
  constexpr float kShift = 0x1.8p23f;  // adding it rounds to an integer in the low bits
  const float z = x * 1.44269504088896341f + kShift;
  const float n = z - kShift;  // round(x / ln2)
  // ln2 split in two: 0.693359375 has few bits, so n * it is exact.
  const float r = (x - n * 0.693359375f) - n * -2.12194440054713771e-4f;
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t ni = std::bit_cast<int32_t>(z) - std::bit_cast<int32_t>(kShift);
  const int32_t n1 = ni >> 1, n2 = ni - n1;  // 2^n = 2^n1 2^n2, each a normal float
  return p * std::bit_cast<float>((n1 + 127) << 23) * std::bit_cast<float>((n2 + 127) << 23);
}
[[gnu::always_inline]] inline double exp(double x) {
  return std::exp(x);
}

[[gnu::always_inline]] inline float log(float x) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const bool subnormal = x < 0x1p-126f;
  const float xs = select(subnormal, x * 0x1p23f, x);
  // Subtracting the bits of sqrt(1/2) puts m = x / 2^e in [sqrt(1/2), sqrt(2)).
  const int32_t shifted = std::bit_cast<int32_t>(xs) - 0x3f3504f3;
  const int32_t e = (shifted >> 23) - 23 * static_cast<int32_t>(subnormal);
  const float f = std::bit_cast<float>((shifted & 0x007fffff) + 0x3f3504f3) - 1.0f;
  float p = 0.06971611471f;
  p = p * f + -0.1147973385f;
  p = p * f + 0.1168541992f;
  p = p * f + -0.1242568733f;
  p = p * f + 0.1424905765f;
  p = p * f + -0.1666780232f;
  p = p * f + 0.2000071575f;
  p = p * f + -0.2499999696f;
  p = p * f + 0.3333333118f;
  const float f2 = f * f, ef = static_cast<float>(e);
  const float y = (f2 * f * p - ef * 2.12194440054713771e-4f - 0.5f * f2 + f) + ef * 0.693359375f;
  const float special =
      select(x == 0.0f, -kInf, select(x == kInf, kInf, std::numeric_limits<float>::quiet_NaN()));
  return select((x > 0.0f) & (x < kInf), y, special);
}
[[gnu::always_inline]] inline double log(double x) {
  return std::log(x);
}

[[gnu::always_inline]] inline float tanh(float x) {
  const float t = x * x;
  float p = 0.002292744816f;
  p = p * t + -0.008343945516f;
  p = p * t + 0.02176891865f;
  p = p * t + -0.05395925958f;
  p = p * t + 0.1333330356f;
  p = p * t + -0.3333333317f;
  const float small = x + x * t * p;
  const float a = std::fabs(x);
  const float large = std::copysign(1.0f - 2.0f / (math::exp(2.0f * a) + 1.0f), x);
  return select(a < 0.625f, small, large);
}
[[gnu::always_inline]] inline double tanh(double x) {
  return std::tanh(x);
}

// Phi(x), the standard normal CDF: (1 + erf(x / sqrt 2)) / 2.
[[gnu::always_inline]] inline float normal_cdf(float x) {
  const float z = x * 0.707106781186547524f, a = std::fabs(z);
  const float t = 0.5f * x * x;  // z^2 with one rounding, not two
  // |z| < 1: erf(z) = z P(z^2).
  float p = 7.875875063e-5f;
  p = p * t + -0.0008016864287f;
  p = p * t + 0.005189087423f;
  p = p * t + -0.02685421201f;
  p = p * t + 0.1128359472f;
  p = p * t + -0.3761262667f;
  p = p * t + 1.128379166f;
  const float central = 0.5f + 0.5f * (z * p);
  // |z| >= 1: erfc(|z|) = e^{-z^2} / |z| * Q(s), s = (1/|z| - 0.55) / 0.45.
  const float inv = 1.0f / a, s = (inv - 0.55f) * (1.0f / 0.45f);
  float q = -1.024677118e-5f;
  q = q * s + 1.844185258e-5f;
  q = q * s + 1.423910807e-5f;
  q = q * s + -7.314030089e-5f;
  q = q * s + 0.0001434189977f;
  q = q * s + -0.0002251797283f;
  q = q * s + 9.78208199e-5f;
  q = q * s + 0.0009195713197f;
  q = q * s + -0.003978215916f;
  q = q * s + 0.008962938567f;
  q = q * s + -0.004123687895f;
  q = q * s + -0.07651580799f;
  q = q * s + 0.5023534233f;
  const float half_erfc = 0.5f * math::exp(-t) * inv * q;  // Phi(-|x|) = erfc(|z|) / 2
  return select(a < 1.0f, central, select(z < 0.0f, half_erfc, 1.0f - half_erfc));
}
[[gnu::always_inline]] inline double normal_cdf(double x) {
  return 0.5 * std::erfc(-x * 0.707106781186547524);
}

}  // namespace trident::kernels::cpu::math
