#include "kernels/cpu/adamw.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/check.h"
#include "core/dtype.h"
#include "core/kernel_switches.h"
#include "core/parallel.h"

namespace trident::kernels::cpu {
namespace {

// The per-step float scalars, computed once (bias corrections in double, then rounded).
struct Scalars {
  float decay, b1, b2, one_minus_b1, one_minus_b2, step_size, bc2_sqrt, eps;
  explicit Scalars(const AdamWStep& s) {
    decay = static_cast<float>(1.0 - s.lr * s.weight_decay);
    b1 = static_cast<float>(s.beta1);
    b2 = static_cast<float>(s.beta2);
    one_minus_b1 = static_cast<float>(1.0 - s.beta1);
    one_minus_b2 = static_cast<float>(1.0 - s.beta2);
    const double bc1 = 1.0 - std::pow(s.beta1, static_cast<double>(s.step));
    const double bc2 = 1.0 - std::pow(s.beta2, static_cast<double>(s.step));
    step_size = static_cast<float>(s.lr / bc1);
    bc2_sqrt = static_cast<float>(std::sqrt(bc2));
    eps = static_cast<float>(s.eps);
  }
};

template <class T>
void update_range(T* param, const T* grad, float* m, float* v, int64_t lo, int64_t hi, const Scalars& c) {
  for (int64_t i = lo; i < hi; ++i) {
    const float g = static_cast<float>(grad[i]);
    const float p = static_cast<float>(param[i]) * c.decay;
    const float mi = m[i] * c.b1 + c.one_minus_b1 * g;
    const float vi = v[i] * c.b2 + c.one_minus_b2 * g * g;
    m[i] = mi;
    v[i] = vi;
    param[i] = static_cast<T>(p - c.step_size * (mi / (std::sqrt(vi) / c.bc2_sqrt + c.eps)));
  }
}

#if defined(__x86_64__)
// GCC 12's avx512fintrin.h seeds _mm512_sqrt_ps with _mm512_undefined_ps(), which
// -Wmaybe-uninitialized reports once inlined here (a false positive: every lane is written).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// 16 lanes at a time, the scalar expressions in the same order (multiplies and adds fused as
// the scalar build may fuse them); the tail goes through the scalar code.
__attribute__((target("avx512f"))) void update_range_avx512(float* param, const float* grad, float* m, float* v,
                                                            int64_t lo, int64_t hi, const Scalars& c) {
  const __m512 decay = _mm512_set1_ps(c.decay), b1 = _mm512_set1_ps(c.b1), b2 = _mm512_set1_ps(c.b2),
               omb1 = _mm512_set1_ps(c.one_minus_b1), omb2 = _mm512_set1_ps(c.one_minus_b2),
               step = _mm512_set1_ps(c.step_size), bc2 = _mm512_set1_ps(c.bc2_sqrt), eps = _mm512_set1_ps(c.eps);
  int64_t i = lo;
  for (; i + 16 <= hi; i += 16) {
    const __m512 g = _mm512_loadu_ps(grad + i);
    const __m512 p = _mm512_mul_ps(_mm512_loadu_ps(param + i), decay);
    const __m512 mi = _mm512_fmadd_ps(_mm512_loadu_ps(m + i), b1, _mm512_mul_ps(omb1, g));
    const __m512 vi = _mm512_fmadd_ps(_mm512_loadu_ps(v + i), b2, _mm512_mul_ps(_mm512_mul_ps(omb2, g), g));
    _mm512_storeu_ps(m + i, mi);
    _mm512_storeu_ps(v + i, vi);
    const __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vi), bc2), eps);
    _mm512_storeu_ps(param + i, _mm512_fnmadd_ps(step, _mm512_div_ps(mi, denom), p));
  }
  update_range(param, grad, m, v, i, hi, c);
}
#pragma GCC diagnostic pop
#endif

bool cpu_has_avx512() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

}  // namespace

bool adamw_uses_avx512() {
  static const bool available = cpu_has_avx512();
  return available && kernel_switch(KernelSwitch::kCpuAvx512);
}

void adamw_update_f32(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWStep& s,
                      bool avx512) {
  TRI_CHECK(!avx512 || adamw_uses_avx512(), "adamw: the AVX-512 path was asked for, but this CPU has no AVX-512F ",
            "or kernels.cpu_avx512 (TRIDENT_CPU_AVX512) turned it off");
  const Scalars c(s);
  // Threads split whole 16-element blocks, so the same elements take the vector code (and only
  // the array's end the scalar tail) whatever the thread count.
  parallel_for(0, (n + 15) / 16, 1024, [&](int64_t b, int64_t e) {
    const int64_t lo = 16 * b, hi = std::min<int64_t>(16 * e, n);
#if defined(__x86_64__)
    if (avx512) return update_range_avx512(param, grad, m, v, lo, hi, c);
#endif
    update_range(param, grad, m, v, lo, hi, c);
  });
}

template <class T>
void adamw_update(T* param, const T* grad, float* m, float* v, int64_t n, const AdamWStep& s) {
  if constexpr (std::is_same_v<T, float>) {
    adamw_update_f32(param, grad, m, v, n, s, adamw_uses_avx512());
  } else {
    const Scalars c(s);
    parallel_for(0, n, 16384, [&](int64_t lo, int64_t hi) { update_range(param, grad, m, v, lo, hi, c); });
  }
}

#define TRI_INSTANTIATE(T) \
  template void adamw_update<T>(T*, const T*, float*, float*, int64_t, const AdamWStep&);
TRI_FOR_EACH_FLOATING_TYPE(TRI_INSTANTIATE)
#undef TRI_INSTANTIATE

}  // namespace trident::kernels::cpu
