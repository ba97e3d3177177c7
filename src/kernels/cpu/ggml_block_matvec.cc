#include "kernels/cpu/ggml_block_matvec.h"

#include <algorithm>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/check.h"
#include "core/half.h"
#include "core/kernel_switches.h"

namespace trident::kernels::cpu {
namespace {

// The 32 codes of block b as integers: Q8_0's bytes, Q4_0's nibbles less 8 (element j < 16 from
// byte j's low nibble, j >= 16 from byte j - 16's high nibble).
inline int code_at(GgmlBlockType t, const uint8_t* qs, int64_t j) {
  if (t == GgmlBlockType::kQ8_0) return static_cast<int8_t>(qs[j]);
  return (j < 16 ? (qs[j] & 15) : (qs[j - 16] >> 4)) - 8;
}

template <int M>
void rows_scalar(GgmlBlockType t, const float* x, const uint8_t* codes, const uint16_t* scales, int64_t cols, int64_t r0,
                 int64_t r1, float* y, int64_t ldy) {
  const int64_t nb = cols / kGgmlBlock, cb = ggml_code_bytes(t);
  for (int64_t r = r0; r < r1; ++r) {
    float acc[M] = {};
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* qs = codes + (r * nb + b) * cb;
      const float d = f16::to_float(scales[r * nb + b]);
      for (int m = 0; m < M; ++m) {
        const float* xb = x + m * cols + b * kGgmlBlock;
        float s = 0.0f;
        for (int64_t j = 0; j < kGgmlBlock; ++j) s += static_cast<float>(code_at(t, qs, j)) * xb[j];
        acc[m] += s * d;
      }
    }
    for (int m = 0; m < M; ++m) y[m * ldy + r] = acc[m];
  }
}

#if defined(__x86_64__)
// GCC 12's avx512fintrin.h seeds conversions with _mm512_undefined_*(), which
// -Wmaybe-uninitialized reports once inlined here (a false positive, as in adamw.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define TRI_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c")))
#define TRI_AVX2 __attribute__((target("avx2,fma,f16c")))

// A block's 32 codes as two vectors of 16 floats.
template <GgmlBlockType T>
TRI_AVX512 inline void block_avx512(const uint8_t* qs, __m512& lo, __m512& hi) {
  if constexpr (T == GgmlBlockType::kQ8_0) {
    lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs))));
    hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16))));
  } else {  // the 16 bytes widened once, both nibbles taken from the 32-bit lanes
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    const __m512i mask = _mm512_set1_epi32(15), eight = _mm512_set1_epi32(8);
    lo = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_and_si512(v, mask), eight));
    hi = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_srli_epi32(v, 4), eight));
  }
}

// How far ahead the codes are prefetched (in blocks; into the next row at a row's end, which is
// where the stream goes next).
constexpr int64_t kPrefetchBlocks = 32;

// lane[j]: the index vector that broadcasts lane j (_mm512_permutexvar_ps).
alignas(64) constexpr int32_t kLane[16][16] = {
#define TRI_LANE(j) {j, j, j, j, j, j, j, j, j, j, j, j, j, j, j, j}
    TRI_LANE(0), TRI_LANE(1), TRI_LANE(2),  TRI_LANE(3),  TRI_LANE(4),  TRI_LANE(5),  TRI_LANE(6),  TRI_LANE(7),
    TRI_LANE(8), TRI_LANE(9), TRI_LANE(10), TRI_LANE(11), TRI_LANE(12), TRI_LANE(13), TRI_LANE(14), TRI_LANE(15)};
#undef TRI_LANE

// Two accumulators per row of x (even and odd blocks), so that consecutive blocks' multiply-adds
// do not wait on each other. The scales of 16 blocks are widened at once and each block's is
// broadcast by one permute: a block's scalar fp16 load, conversion and broadcast cost as much as
// its codes' widening, and both compete for the same port.
template <GgmlBlockType T, int M>
TRI_AVX512 void rows_avx512(const float* x, const uint8_t* codes, const uint16_t* scales, int64_t cols, int64_t r0,
                            int64_t r1, float* y, int64_t ldy) {
  const int64_t nb = cols / kGgmlBlock, cb = ggml_code_bytes(T);
  for (int64_t r = r0; r < r1; ++r) {
    __m512 acc[2][M];
    for (int m = 0; m < M; ++m) acc[0][m] = acc[1][m] = _mm512_setzero_ps();
    const uint8_t* qr = codes + r * nb * cb;
    const uint16_t* dr = scales + r * nb;
    for (int64_t g = 0; g < nb; g += 16) {
      const int64_t n = std::min<int64_t>(16, nb - g);
      const __m512 d16 = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << n) - 1), dr + g));
      for (int64_t j = 0; j < n; ++j) {
        const int64_t b = g + j;
        _mm_prefetch(reinterpret_cast<const char*>(qr + (b + kPrefetchBlocks) * cb), _MM_HINT_T0);
        __m512 lo, hi;
        block_avx512<T>(qr + b * cb, lo, hi);
        const __m512 d = _mm512_permutexvar_ps(_mm512_load_si512(kLane[j]), d16);
        for (int m = 0; m < M; ++m) {
          const float* xb = x + m * cols + b * kGgmlBlock;
          const __m512 s = _mm512_fmadd_ps(hi, _mm512_loadu_ps(xb + 16), _mm512_mul_ps(lo, _mm512_loadu_ps(xb)));
          acc[b & 1][m] = _mm512_fmadd_ps(s, d, acc[b & 1][m]);
        }
      }
    }
    for (int m = 0; m < M; ++m) y[m * ldy + r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[0][m], acc[1][m]));
  }
}

// A block's 32 codes as four vectors of 8 floats.
template <GgmlBlockType T>
TRI_AVX2 inline void block_avx2(const uint8_t* qs, __m256 (&q)[4]) {
  __m128i l, h;
  if constexpr (T == GgmlBlockType::kQ8_0) {
    l = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16));
  } else {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m128i mask = _mm_set1_epi8(15), eight = _mm_set1_epi8(8);
    l = _mm_sub_epi8(_mm_and_si128(v, mask), eight);
    h = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), mask), eight);
  }
  q[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(l));
  q[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(l, 8)));
  q[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(h));
  q[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(h, 8)));
}

TRI_AVX2 inline float sum_avx2(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

template <GgmlBlockType T, int M>
TRI_AVX2 void rows_avx2(const float* x, const uint8_t* codes, const uint16_t* scales, int64_t cols, int64_t r0,
                        int64_t r1, float* y, int64_t ldy) {
  const int64_t nb = cols / kGgmlBlock, cb = ggml_code_bytes(T);
  for (int64_t r = r0; r < r1; ++r) {
    __m256 acc[M];
    for (int m = 0; m < M; ++m) acc[m] = _mm256_setzero_ps();
    const uint8_t* qr = codes + r * nb * cb;
    const uint16_t* dr = scales + r * nb;
    for (int64_t b = 0; b < nb; ++b) {
      __m256 q[4];
      block_avx2<T>(qr + b * cb, q);
      const __m256 d = _mm256_set1_ps(_cvtsh_ss(dr[b]));
      for (int m = 0; m < M; ++m) {
        const float* xb = x + m * cols + b * kGgmlBlock;
        __m256 s = _mm256_mul_ps(q[0], _mm256_loadu_ps(xb));
        s = _mm256_fmadd_ps(q[1], _mm256_loadu_ps(xb + 8), s);
        s = _mm256_fmadd_ps(q[2], _mm256_loadu_ps(xb + 16), s);
        s = _mm256_fmadd_ps(q[3], _mm256_loadu_ps(xb + 24), s);
        acc[m] = _mm256_fmadd_ps(s, d, acc[m]);
      }
    }
    for (int m = 0; m < M; ++m) y[m * ldy + r] = sum_avx2(acc[m]);
  }
}
#pragma GCC diagnostic pop
#endif

using RowsFn = void (*)(const float*, const uint8_t*, const uint16_t*, int64_t, int64_t, int64_t, float*, int64_t);

template <GgmlBlockType T, int M>
void rows_scalar_of(const float* x, const uint8_t* codes, const uint16_t* scales, int64_t cols, int64_t r0, int64_t r1,
                    float* y, int64_t ldy) {
  rows_scalar<M>(T, x, codes, scales, cols, r0, r1, y, ldy);
}

// The kernel of (isa, type, M), from tables of the templates' instances.
template <GgmlBlockType T, int... Ms>
RowsFn pick(MatvecIsa isa, int64_t M, std::integer_sequence<int, Ms...>) {
  static constexpr RowsFn scalar[] = {&rows_scalar_of<T, Ms + 1>...};
#if defined(__x86_64__)
  static constexpr RowsFn avx512[] = {&rows_avx512<T, Ms + 1>...};
  static constexpr RowsFn avx2[] = {&rows_avx2<T, Ms + 1>...};
  if (isa == MatvecIsa::kAvx512) return avx512[M - 1];
  if (isa == MatvecIsa::kAvx2) return avx2[M - 1];
#endif
  return scalar[M - 1];
}

bool cpu_supports(MatvecIsa isa) {
#if defined(__x86_64__)
  if (isa == MatvecIsa::kAvx512)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  if (isa == MatvecIsa::kAvx2)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#endif
  return isa == MatvecIsa::kScalar;
}

}  // namespace

const char* matvec_isa_name(MatvecIsa isa) {
  switch (isa) {
    case MatvecIsa::kAvx512: return "avx512";
    case MatvecIsa::kAvx2: return "avx2";
    case MatvecIsa::kScalar: break;
  }
  return "scalar";
}

bool ggml_matvec_supports(MatvecIsa isa) {
  static const bool avx512 = cpu_supports(MatvecIsa::kAvx512), avx2 = cpu_supports(MatvecIsa::kAvx2);
  return isa == MatvecIsa::kAvx512 ? avx512 : isa == MatvecIsa::kAvx2 ? avx2 : true;
}

MatvecIsa ggml_matvec_isa() {
  if (ggml_matvec_supports(MatvecIsa::kAvx512) && kernel_switch(KernelSwitch::kCpuAvx512)) return MatvecIsa::kAvx512;
  if (ggml_matvec_supports(MatvecIsa::kAvx2)) return MatvecIsa::kAvx2;
  return MatvecIsa::kScalar;
}

void ggml_block_matvec(GgmlBlockType t, MatvecIsa isa, const float* x, int64_t M, const uint8_t* codes,
                       const uint16_t* scales, int64_t cols, int64_t r0, int64_t r1, float* y, int64_t ldy) {
  TRI_CHECK(1 <= M && M <= kGgmlMatvecMaxRows, "ggml_block_matvec: ", M, " rows of x (1 to ", kGgmlMatvecMaxRows, ")");
  TRI_CHECK(cols % kGgmlBlock == 0, "ggml_block_matvec: ", cols, " columns are not whole blocks of ", kGgmlBlock);
  TRI_CHECK(ggml_matvec_supports(isa), "ggml_block_matvec: this CPU has no ", matvec_isa_name(isa));
  const auto rows = std::make_integer_sequence<int, kGgmlMatvecMaxRows>();
  const RowsFn fn = t == GgmlBlockType::kQ8_0 ? pick<GgmlBlockType::kQ8_0>(isa, M, rows)
                                              : pick<GgmlBlockType::kQ4_0>(isa, M, rows);
  fn(x, codes, scales, cols, r0, r1, y, ldy);
}

}  // namespace trident::kernels::cpu
