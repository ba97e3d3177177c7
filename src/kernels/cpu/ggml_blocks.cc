// Compiled with -ffp-contract=off: see Note [ggml's rounding without fused multiply-adds].
#include "kernels/cpu/ggml_blocks.h"

#include <algorithm>
#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/check.h"
#include "core/dtype.h"
#include "core/half.h"
#include "kernels/cpu/x86_kernel_targets.h"

namespace trident::kernels::cpu {
namespace {

// quantize_row_q8_0_ref, one block.
void quantize_q8_0(const float* x, uint8_t* qs, uint16_t* d_bits) {
  float amax = 0.0f;
  for (int64_t j = 0; j < kGgmlBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_bits = f16::round_from_float(d);
  for (int64_t j = 0; j < kGgmlBlock; ++j) qs[j] = static_cast<uint8_t>(static_cast<int8_t>(std::roundf(x[j] * id)));
}

// quantize_row_q4_0_ref, one block.
void quantize_q4_0(const float* x, uint8_t* qs, uint16_t* d_bits) {
  float amax = 0.0f, max = 0.0f;
  for (int64_t j = 0; j < kGgmlBlock; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_bits = f16::round_from_float(d);
  for (int64_t j = 0; j < kGgmlBlock / 2; ++j) {
    const float x0 = x[j] * id, x1 = x[kGgmlBlock / 2 + j] * id;
    const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(x0 + 8.5f)));
    const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(x1 + 8.5f)));
    qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}

// Note [Q8_0 activations in vectors]
// Prefill quantizes every row of x before each product (128-1024 rows of 768-3072 values), and
// the reference's scalar roundf made that 5-25% of the integer GEMM's time. The vector paths
// compute the same numbers: amax is an exact maximum, d = amax / 127 and id = 1 / d are the same
// correctly rounded scalar operations, x * id is one rounded multiply per lane (this file is
// compiled without contraction, so nothing fuses it with what follows), and roundf's
// half-away-from-zero is built exactly from truncation: t = trunc(v), and t + sign(v) where
// |v - t| >= 0.5 (v - t is exact, |v| <= 127). A test compares every path with the reference.
#if defined(__x86_64__)
TRI_X86_INTRINSICS_BEGIN
// (Narrower targets than the dot-product kernels': these paths run on AVX-512 without VNNI.)
#define TRI_Q8_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,f16c")))
#define TRI_Q8_AVX2 __attribute__((target("avx2,fma")))

// 16 vectors' lanes reduced with op: lane j of the result is op over vector j's 16 lanes. A
// tree of in-lane unpacks, then 128-bit lane shuffles: 45 operations for 16 reductions, where
// each _mm512_reduce_* is 8 with a dependent chain.
template <class Op>
TRI_Q8_AVX512 inline __m512 reduce_16_lanes(const __m512 (&v)[16], Op op) {
  __m512 u[8], w[4];
  for (int i = 0; i < 8; ++i)  // per 128-bit lane: [v2i (0|2), v2i+1 (0|2), v2i (1|3), v2i+1 (1|3)]
    u[i] = op(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i) {  // per 128-bit lane: one partial of each of v4i .. v4i+3
    const __m512d a = _mm512_castps_pd(u[2 * i]), b = _mm512_castps_pd(u[2 * i + 1]);
    w[i] = op(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  const __m512 z01 = op(_mm512_shuffle_f32x4(w[0], w[1], 0x88), _mm512_shuffle_f32x4(w[0], w[1], 0xdd));
  const __m512 z23 = op(_mm512_shuffle_f32x4(w[2], w[3], 0x88), _mm512_shuffle_f32x4(w[2], w[3], 0xdd));
  return op(_mm512_shuffle_f32x4(z01, z23, 0x88), _mm512_shuffle_f32x4(z01, z23, 0xdd));
}

// Block b's codes (and their int32 values in q) from its 32 values and 1 / d, rounded as ggml's
// reference rounds (Note [Q8_0 activations in vectors]).
TRI_Q8_AVX512 inline void round_q8_0_block(const float* x, float id, uint8_t* codes, __m512i (&q)[2]) {
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f), vid = _mm512_set1_ps(id);
  for (int h = 0; h < 2; ++h) {
    const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + 16 * h), vid);
    const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __mmask16 up = _mm512_cmp_ps_mask(_mm512_and_ps(_mm512_sub_ps(v, t), abs_mask), half, _CMP_GE_OQ);
    const __m512 sign_one = _mm512_or_ps(one, _mm512_andnot_ps(abs_mask, v));
    q[h] = _mm512_cvttps_epi32(_mm512_mask_add_ps(t, up, t, sign_one));
  }
  _mm_storeu_si128(reinterpret_cast<__m128i*>(codes), _mm512_cvtsepi32_epi8(q[0]));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + 16), _mm512_cvtsepi32_epi8(q[1]));
}

// F16C rounds every non-NaN float to fp16 as f16::round_from_float does (checked over every
// finite non-negative float, 2026-11-30); NaN keeps the reference's bits.
TRI_Q8_AVX512 inline uint16_t scale_bits(float d) {
  return d == d ? static_cast<uint16_t>(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT)) : f16::round_from_float(d);
}

// The reductions' operations (functors with the target attribute: a lambda would not have it).
struct MaxLanes {
  TRI_Q8_AVX512 __m512 operator()(__m512 a, __m512 c) const { return _mm512_max_ps(a, c); }
};
struct AddInt32Lanes {
  TRI_Q8_AVX512 __m512 operator()(__m512 a, __m512 c) const {
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(c)));
  }
};

// Note [Sixteen blocks at a time]
// A block's amax and its codes' sum are horizontal reductions, and done one block at a time
// (each a dependent chain of shuffles, then a scalar divide and a scalar fp16 rounding) they made
// quantizing prefill's activations ~60 cycles a block: 3% of an int8 prefill (GPT-2 124M, 8
// prompts of 128 tokens; 1.2 ms of a 7 ms product for a 1024 x 3072 x). Sixteen blocks at a time,
// the 16 maxima and 16 sums come out of one reduction tree each (reduce_16_lanes), and the 16
// scales and reciprocals out of one vector divide each: the same operations on the same values
// (max is exact in any order, the sums are integers), so the same bits. Measured in turns on 2
// Zen 5 cores (1024 rows, a one-off program): quantizing a 1024 x 3072 x took 0.82-0.85 ms
// before, 0.51-0.54 with the compact arrays alone (GgmlQ8Activations), 0.31-0.32 with both;
// 1024 x 768, 0.22-0.23, 0.14, 0.11-0.16 ms.
TRI_Q8_AVX512 void quantize_q8_0_row_avx512(const float* x, int64_t n, uint8_t* codes, uint16_t* scales,
                                              int32_t* sums) {
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  const int64_t nb = n / kGgmlBlock;
  int64_t b = 0;
  for (; b + 16 <= nb; b += 16) {
    const float* xb = x + b * kGgmlBlock;
    __m512 m[16];
    for (int j = 0; j < 16; ++j)
      m[j] = _mm512_max_ps(_mm512_and_ps(_mm512_loadu_ps(xb + j * kGgmlBlock), abs_mask),
                           _mm512_and_ps(_mm512_loadu_ps(xb + j * kGgmlBlock + 16), abs_mask));
    const __m512 amax = reduce_16_lanes(m, MaxLanes{});
    const __m512 d = _mm512_div_ps(amax, _mm512_set1_ps(127.0f));
    const __mmask16 nonzero = _mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_NEQ_UQ);
    alignas(64) float id[16];
    _mm512_store_ps(id, _mm512_maskz_div_ps(nonzero, _mm512_set1_ps(1.0f), d));
    if (_mm512_cmp_ps_mask(d, d, _CMP_UNORD_Q) == 0) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(scales + b), _mm512_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT));
    } else {  // a NaN scale: each through scale_bits, the reference's bits
      alignas(64) float dv[16];
      _mm512_store_ps(dv, d);
      for (int j = 0; j < 16; ++j) scales[b + j] = scale_bits(dv[j]);
    }
    __m512 partial[16];
    for (int j = 0; j < 16; ++j) {
      __m512i q[2];
      round_q8_0_block(xb + j * kGgmlBlock, id[j], codes + (b + j) * kGgmlBlock, q);
      partial[j] = _mm512_castsi512_ps(_mm512_add_epi32(q[0], q[1]));
    }
    const __m512 total = reduce_16_lanes(partial, AddInt32Lanes{});
    _mm512_storeu_si512(sums + b, _mm512_castps_si512(total));
  }
  for (; b < nb; ++b) {
    const __m512 x0 = _mm512_loadu_ps(x + b * kGgmlBlock), x1 = _mm512_loadu_ps(x + b * kGgmlBlock + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_and_ps(x0, abs_mask), _mm512_and_ps(x1, abs_mask)));
    const float d = amax / 127.0f;
    scales[b] = scale_bits(d);
    __m512i q[2];
    round_q8_0_block(x + b * kGgmlBlock, d != 0.0f ? 1.0f / d : 0.0f, codes + b * kGgmlBlock, q);
    sums[b] = _mm512_reduce_add_epi32(_mm512_add_epi32(q[0], q[1]));
  }
}

TRI_Q8_AVX2 void quantize_q8_0_row_avx2(const float* x, int64_t n, uint8_t* codes, uint16_t* scales, int32_t* sums) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  for (int64_t b = 0; b < n / kGgmlBlock; ++b) {
    __m256 xs[4];
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      xs[k] = _mm256_loadu_ps(x + b * kGgmlBlock + 8 * k);
      m = _mm256_max_ps(m, _mm256_and_ps(xs[k], abs_mask));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    scales[b] = f16::round_from_float(d);
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      const __m256 v = _mm256_mul_ps(xs[k], vid);
      const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      const __m256 up = _mm256_cmp_ps(_mm256_and_ps(_mm256_sub_ps(v, t), abs_mask), half, _CMP_GE_OQ);
      const __m256 sign_one = _mm256_or_ps(one, _mm256_andnot_ps(abs_mask, v));
      q[k] = _mm256_cvttps_epi32(_mm256_add_ps(t, _mm256_and_ps(up, sign_one)));
    }
    // int32 -> int8 in order: the packs interleave 128-bit lanes, the permute puts them back.
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + b * kGgmlBlock),
                        _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    const __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    sums[b] = _mm_cvtsi128_si32(s4);
  }
}
TRI_X86_INTRINSICS_END
#endif

void quantize_q8_0_row_scalar(const float* x, int64_t n, uint8_t* codes, uint16_t* scales, int32_t* sums) {
  for (int64_t b = 0; b < n / kGgmlBlock; ++b) {
    quantize_q8_0(x + b * kGgmlBlock, codes + b * kGgmlBlock, scales + b);
    int32_t sum = 0;
    for (int64_t j = 0; j < kGgmlBlock; ++j) sum += static_cast<int8_t>(codes[b * kGgmlBlock + j]);
    sums[b] = sum;
  }
}

}  // namespace

bool ggml_quantize_supports(GgmlQuantizeIsa isa) {
#if defined(__x86_64__)
  static const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") && cpu_has_f16c(),
                    avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (isa == GgmlQuantizeIsa::kAvx512) return avx512;
  if (isa == GgmlQuantizeIsa::kAvx2) return avx2;
#endif
  return isa == GgmlQuantizeIsa::kScalar;
}

void ggml_quantize_q8_0_row(GgmlQuantizeIsa isa, const float* x, int64_t n, uint8_t* codes, uint16_t* scales,
                            int32_t* sums) {
  TRI_CHECK(ggml_quantize_supports(isa), "ggml_quantize_q8_0_row: this CPU cannot run the ",
            isa == GgmlQuantizeIsa::kAvx512 ? "AVX-512" : "AVX2", " path");
#if defined(__x86_64__)
  if (isa == GgmlQuantizeIsa::kAvx512) return quantize_q8_0_row_avx512(x, n, codes, scales, sums);
  if (isa == GgmlQuantizeIsa::kAvx2) return quantize_q8_0_row_avx2(x, n, codes, scales, sums);
#endif
  quantize_q8_0_row_scalar(x, n, codes, scales, sums);
}

void ggml_quantize_q8_0_row(const float* x, int64_t n, uint8_t* codes, uint16_t* scales, int32_t* sums) {
  static const GgmlQuantizeIsa best = ggml_quantize_supports(GgmlQuantizeIsa::kAvx512) ? GgmlQuantizeIsa::kAvx512
                                      : ggml_quantize_supports(GgmlQuantizeIsa::kAvx2) ? GgmlQuantizeIsa::kAvx2
                                                                                        : GgmlQuantizeIsa::kScalar;
  ggml_quantize_q8_0_row(best, x, n, codes, scales, sums);
}

const char* ggml_block_type_name(GgmlBlockType t) { return t == GgmlBlockType::kQ8_0 ? "Q8_0" : "Q4_0"; }

void ggml_quantize_blocks(GgmlBlockType t, const float* x, int64_t n, uint8_t* codes, uint16_t* scales) {
  const int64_t code_bytes = ggml_code_bytes(t);
  for (int64_t b = 0; b < n / kGgmlBlock; ++b) {
    if (t == GgmlBlockType::kQ8_0) quantize_q8_0(x + b * kGgmlBlock, codes + b * code_bytes, scales + b);
    else quantize_q4_0(x + b * kGgmlBlock, codes + b * code_bytes, scales + b);
  }
}

template <class T>
void ggml_dequantize(GgmlBlockType t, const uint8_t* codes, const uint16_t* scales, int64_t begin, int64_t end, T* out) {
  const int64_t code_bytes = ggml_code_bytes(t);
  float block[kGgmlBlock];
  for (int64_t i = begin; i < end;) {
    const int64_t b = i / kGgmlBlock, first = i - b * kGgmlBlock, stop = std::min(end, (b + 1) * kGgmlBlock);
    const float d = f16::to_float(scales[b]);
    const uint8_t* qs = codes + b * code_bytes;
    // A whole block in straight loops the compiler vectorizes (prefill dequantizes every weight).
    if (t == GgmlBlockType::kQ8_0) {
      for (int64_t j = 0; j < kGgmlBlock; ++j) block[j] = static_cast<float>(static_cast<int8_t>(qs[j])) * d;
    } else {
      for (int64_t j = 0; j < kGgmlBlock / 2; ++j) {
        block[j] = static_cast<float>((qs[j] & 15) - 8) * d;
        block[j + kGgmlBlock / 2] = static_cast<float>((qs[j] >> 4) - 8) * d;
      }
    }
    for (int64_t j = first; j < stop - b * kGgmlBlock; ++j) out[b * kGgmlBlock + j - begin] = static_cast<T>(block[j]);
    i = stop;
  }
}

#define TRI_INSTANTIATE(T) \
  template void ggml_dequantize<T>(GgmlBlockType, const uint8_t*, const uint16_t*, int64_t, int64_t, T*);
TRI_FOR_EACH_FLOATING_TYPE(TRI_INSTANTIATE)
#undef TRI_INSTANTIATE

}  // namespace trident::kernels::cpu
