#include "kernels/cpu/int8_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/check.h"

namespace trident::kernels::cpu {
namespace {

// The row's scale and the factor codes are computed with: absmax / 127 and 127 / absmax.
// Zero rows: 0 and 0 (codes 0). A NaN or infinity: NaN and 0 (see the header).
struct RowScale {
  float scale, inverse;
};

RowScale row_scale(float absmax, bool finite) {
  if (!finite) return {std::numeric_limits<float>::quiet_NaN(), 0.0f};
  if (absmax == 0.0f) return {0.0f, 0.0f};
  return {absmax / 127.0f, 127.0f / absmax};
}

// round_half_even(v) clamped to [-127, 127]: nearbyint in the default rounding mode, as
// vcvtps2dq rounds.
int8_t code_of(float v) {
  const float r = std::nearbyint(v);
  return static_cast<int8_t>(r > 127.0f ? 127.0f : (r < -127.0f ? -127.0f : r));
}

void quantize_row_scalar(const float* x, int64_t K, int8_t* q, float* scale) {
  float absmax = 0.0f;
  bool finite = true;
  for (int64_t k = 0; k < K; ++k) {
    finite = finite && std::isfinite(x[k]);
    absmax = std::max(absmax, std::fabs(x[k]));
  }
  const RowScale s = row_scale(absmax, finite);
  *scale = s.scale;
  if (!finite) {  // inf * 0 is NaN, which has no code
    std::memset(q, 0, static_cast<size_t>(K));
    return;
  }
  for (int64_t k = 0; k < K; ++k) q[k] = code_of(x[k] * s.inverse);
}

#if defined(__x86_64__)
// GCC 12's AVX-512 headers seed masked intrinsics with _mm512_undefined_*(), which
// -W(maybe-)uninitialized reports once inlined (a false positive, as in adamw.cc).
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
// 16 lanes at a time with the scalar expressions; the tail masked. Non-finite values are found
// by x - x (NaN for NaN and infinities), since max_ps drops a NaN operand.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void quantize_row_avx512(const float* x, int64_t K, int8_t* q,
                                                                     float* scale) {
  __m512 absmax = _mm512_setzero_ps();
  __mmask16 not_finite = 0;
  for (int64_t k = 0; k < K; k += 16) {
    const __mmask16 m = K - k >= 16 ? __mmask16(0xffff) : __mmask16((1u << (K - k)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + k);
    absmax = _mm512_max_ps(absmax, _mm512_abs_ps(v));
    not_finite |= _mm512_cmp_ps_mask(_mm512_sub_ps(v, v), _mm512_sub_ps(v, v), _CMP_UNORD_Q);
  }
  const RowScale s = row_scale(_mm512_reduce_max_ps(absmax), not_finite == 0);
  *scale = s.scale;
  const __m512 inverse = _mm512_set1_ps(s.inverse);
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  for (int64_t k = 0; k < K; k += 16) {
    const __mmask16 m = K - k >= 16 ? __mmask16(0xffff) : __mmask16((1u << (K - k)) - 1);
    // A non-finite row's inverse is 0, but inf * 0 is NaN, which converts to INT_MIN: clamped
    // to -127 here and overwritten with zeros below.
    const __m512i c = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + k), inverse));
    _mm_mask_storeu_epi8(q + k, m, _mm512_cvtepi32_epi8(_mm512_min_epi32(_mm512_max_epi32(c, lo), hi)));
  }
  if (not_finite != 0) std::memset(q, 0, static_cast<size_t>(K));
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

}  // namespace

void quantize_rows_int8(const float* x, int64_t M, int64_t K, int64_t ldx, int8_t* q, int64_t ldq, float* scale,
                        Int8Isa isa) {
  TRI_CHECK(M >= 0 && K >= 0 && ldx >= K && ldq >= K, "quantize_rows_int8: M=", M, " K=", K, " ldx=", ldx,
            " ldq=", ldq, " (need M, K >= 0 and row strides >= K)");
  isa = int8_isa_resolve(isa);
  for (int64_t r = 0; r < M; ++r) {
#if defined(__x86_64__)
    if (isa == Int8Isa::kAvx512Vnni) {
      quantize_row_avx512(x + r * ldx, K, q + r * ldq, scale + r);
      continue;
    }
#endif
    quantize_row_scalar(x + r * ldx, K, q + r * ldq, scale + r);
  }
}

}  // namespace trident::kernels::cpu
