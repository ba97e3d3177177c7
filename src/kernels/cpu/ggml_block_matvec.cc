#include "kernels/cpu/ggml_block_matvec.h"

#include <algorithm>
#include <cstring>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/check.h"
#include "core/half.h"
#include "core/kernel_switches.h"
#include "core/parallel.h"
#include "kernels/cpu/x86_kernel_targets.h"

namespace trident::kernels::cpu {

// Note [Integer dot products at decode]
// Why quantize the activations? A decode step reads each weight code once and does M
// multiply-adds with it. Widening every int8 code to fp32 for an FMA costs about ten
// instructions per 32 weights, more than two cores can issue while the memory delivers 34 bytes
// of Q8_0 (measured on Emerald Rapids: the fp32-activation kernel read at 66-72% of the
// bandwidth where fp32 weights read at 84-90%, so int8 decode was 1.55x fp32's, not the 3.8x
// its bytes allow). With x in Q8_0 blocks too, one vpdpbusd multiplies 64 code bytes by 64 and
// sums them by fours, exactly, in int32; a block's sum is then scaled once by d_w d_x. This is
// llama.cpp's arithmetic for Q8_0 and Q4_0 weights (its CPU backend quantizes the activations
// to Q8_0 for every product), so trident's decode computes what llama.cpp computes from the same
// file. The activation's rounding adds an error of the order of the weight's own (Q8_0's relative
// RMS error is ~0.5%); tests/quantization/ggml_weight_test.cc bounds both.
//
// vpdpbusd multiplies unsigned by signed bytes. The weight is made the unsigned operand: a Q8_0
// code w in [-127, 127] as w + 128 (an xor of the sign bit), a Q4_0 nibble q as it is (its value
// is q - 8). The sums are then too large by 128 (or 8) x the activation block's code sum, a
// number known when x is quantized: GgmlQ8Activations keeps its negative in the lane where the
// pair's block starts, and the kernel starts each sum from it, so the int32 result is exact and
// no instruction is spent on the correction. The AVX2 path (vpmaddubsw, no VNNI) uses llama.cpp's
// |x| x sign(w, x) instead, whose pairs of products fit int16 (2 x 127 x 127).

namespace {

// The 32 codes of a weight block as integers: Q8_0's bytes, Q4_0's nibbles less 8 (element j < 16
// from byte j's low nibble, j >= 16 from byte j - 16's high nibble).
inline int code_at(GgmlBlockType t, const uint8_t* qs, int64_t j) {
  if (t == GgmlBlockType::kQ8_0) return static_cast<int8_t>(qs[j]);
  return (j < 16 ? (qs[j] & 15) : (qs[j - 16] >> 4)) - 8;
}

// The reference: each block's exact integer sum, scaled by d_w d_x, summed in block order.
template <int M>
void rows_scalar(GgmlBlockType t, const GgmlQ8Activations& x, const uint8_t* codes,
                 const uint16_t* scales, int64_t r0, int64_t r1, float* y, int64_t ldy) {
  const int64_t nb = x.blocks(), cb = ggml_code_bytes(t);
  for (int64_t r = r0; r < r1; ++r) {
    float acc[M] = {};
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* qs = codes + (r * nb + b) * cb;
      const float d = f16::to_float(scales[r * nb + b]);
      for (int m = 0; m < M; ++m) {
        const int8_t* xq = x.codes(m) + b * kGgmlBlock;
        int32_t s = 0;
        for (int64_t j = 0; j < kGgmlBlock; ++j) s += code_at(t, qs, j) * int32_t{xq[j]};
        acc[m] += static_cast<float>(s) * (d * x.scale(m, b));
      }
    }
    for (int m = 0; m < M; ++m) y[m * ldy + r] = acc[m];
  }
}

#if defined(__x86_64__)
TRI_X86_INTRINSICS_BEGIN

// How far ahead the weight codes are prefetched, in bytes (into the next row at a row's end,
// which is where the stream goes next).
constexpr int64_t kPrefetchBytes = 1024;

// pair_lanes[j]: the index vector that puts block 2j's value in lanes 0-7 and block 2j + 1's in
// lanes 8-15 (_mm512_permutexvar_ps over 16 blocks' scales).
alignas(64) constexpr int32_t kPairLanes[8][16] = {
#define TRI_PAIR(j)                                                                          \
  {                                                                                          \
    2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j + 1, 2 * j + 1, 2 * j + 1, \
        2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1                                \
  }
    TRI_PAIR(0), TRI_PAIR(1), TRI_PAIR(2), TRI_PAIR(3),
    TRI_PAIR(4), TRI_PAIR(5), TRI_PAIR(6), TRI_PAIR(7)};
#undef TRI_PAIR

// Blocks 2p and 2p + 1 of a weight row as 64 unsigned bytes in x's order (Note [Integer dot
// products at decode]); `whole` is false for a row's odd last block (its second half is zeros).
template <GgmlBlockType T>
TRI_AVX512 inline __m512i pair_codes(const uint8_t* qs, bool whole) {
  if constexpr (T == GgmlBlockType::kQ8_0) {
    const __m512i w =
        whole ? _mm512_loadu_si512(qs)
              : _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs)));
    // w + 128 for the codes; the zeros past a lone block become 128, times x's zeros.
    return _mm512_xor_si512(w, _mm512_set1_epi8(static_cast<char>(0x80)));
  } else {
    const __m256i v =
        whole ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs))
              : _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    // 128-bit lanes [block 0's bytes, block 0's bytes, block 1's, block 1's]: low nibbles in
    // lanes 0 and 2 (elements 0-15), high nibbles in lanes 1 and 3 (elements 16-31).
    const __m512i v4 =
        _mm512_shuffle_i64x2(_mm512_castsi256_si512(v), _mm512_castsi256_si512(v), 0x50);
    const __m512i high = _mm512_mask_srli_epi16(v4, 0xff00ff00u, v4, 4);  // lanes 1 and 3 shifted
    return _mm512_and_si512(high, _mm512_set1_epi8(15));
  }
}

// The activation rows' arrays the AVX-512 path reads per pair.
template <int M>
struct PairRows {
  const int8_t* codes[M];
  const float* scale_lanes[M];
  const int32_t* corrections[M];
};

// One pair of weight blocks (codes at qs, scales spread over lanes in dw) times the M rows'
// pair p, into acc.
template <GgmlBlockType T, int M, bool kWhole>
TRI_AVX512 __attribute__((always_inline)) inline void pair_step(__m512 (&acc)[M],
                                                                const PairRows<M>& x,
                                                                const uint8_t* qs, int64_t p,
                                                                __m512 dw) {
  _mm_prefetch(reinterpret_cast<const char*>(qs + kPrefetchBytes), _MM_HINT_T0);
  const __m512i w = pair_codes<T>(qs, kWhole);
  for (int m = 0; m < M; ++m) {
    const __m512i sum = _mm512_dpbusd_epi32(_mm512_loadu_si512(x.corrections[m] + p * 16), w,
                                            _mm512_loadu_si512(x.codes[m] + p * 64));
    acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum),
                             _mm512_mul_ps(dw, _mm512_loadu_ps(x.scale_lanes[m] + p * 16)), acc[m]);
  }
}

// Two accumulators per row of x (even and odd pairs, named, not indexed: an indexed pair of
// arrays is kept in memory by GCC, and each multiply-add then waits on a store and a load), so
// that consecutive pairs' multiply-adds do not wait on each other. The weight scales of 16
// blocks are widened at once and each pair's spread over its lanes by one permute.
template <GgmlBlockType T, int M>
TRI_AVX512 void rows_avx512(const GgmlQ8Activations& x, const uint8_t* codes,
                            const uint16_t* scales, int64_t r0, int64_t r1, float* y, int64_t ldy) {
  constexpr int64_t cb = ggml_code_bytes(T);
  const int64_t nb = x.blocks(), whole_pairs = nb / 2;
  PairRows<M> xr;
  for (int m = 0; m < M; ++m) {
    xr.codes[m] = x.codes(m);
    xr.scale_lanes[m] = x.scale_lanes(m);
    xr.corrections[m] = x.corrections(m);
  }
  for (int64_t r = r0; r < r1; ++r) {
    __m512 even[M], odd[M];
    for (int m = 0; m < M; ++m) even[m] = odd[m] = _mm512_setzero_ps();
    const uint8_t* qr = codes + r * nb * cb;
    const uint16_t* dr = scales + r * nb;
    for (int64_t g = 0; g < nb; g += 16) {  // 16 blocks' scales, 8 pairs
      const int64_t n = std::min<int64_t>(16, nb - g);
      const __m512 d16 =
          _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << n) - 1), dr + g));
      const int64_t p0 = g / 2, p1 = std::min(whole_pairs, p0 + 8);
      int64_t p = p0;
      for (; p + 1 < p1; p += 2) {
        pair_step<T, M, true>(even, xr, qr + 2 * p * cb, p,
                              _mm512_permutexvar_ps(_mm512_load_si512(kPairLanes[p - p0]), d16));
        pair_step<T, M, true>(
            odd, xr, qr + 2 * (p + 1) * cb, p + 1,
            _mm512_permutexvar_ps(_mm512_load_si512(kPairLanes[p + 1 - p0]), d16));
      }
      if (p < p1)
        pair_step<T, M, true>(even, xr, qr + 2 * p * cb, p,
                              _mm512_permutexvar_ps(_mm512_load_si512(kPairLanes[p - p0]), d16));
      if (p1 == whole_pairs && nb % 2 == 1 && whole_pairs < p0 + 8)  // the row's lone last block
        pair_step<T, M, false>(
            odd, xr, qr + 2 * whole_pairs * cb, whole_pairs,
            _mm512_permutexvar_ps(_mm512_load_si512(kPairLanes[whole_pairs - p0]), d16));
    }
    for (int m = 0; m < M; ++m)
      y[m * ldy + r] = _mm512_reduce_add_ps(_mm512_add_ps(even[m], odd[m]));
  }
}

// A weight block's 32 codes as signed bytes in x's order.
template <GgmlBlockType T>
TRI_AVX2 inline __m256i block_codes_avx2(const uint8_t* qs) {
  if constexpr (T == GgmlBlockType::kQ8_0) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
  } else {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(v, 4), v);
    return _mm256_sub_epi8(_mm256_and_si256(both, _mm256_set1_epi8(15)), _mm256_set1_epi8(8));
  }
}

TRI_AVX2 inline float sum_avx2(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

// |x| x sign(w, x) by vpmaddubsw (pairs, int16), widened by vpmaddwd (fours, int32).
template <GgmlBlockType T, int M>
TRI_AVX2 void rows_avx2(const GgmlQ8Activations& x, const uint8_t* codes, const uint16_t* scales,
                        int64_t r0, int64_t r1, float* y, int64_t ldy) {
  constexpr int64_t cb = ggml_code_bytes(T);
  const int64_t nb = x.blocks();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t r = r0; r < r1; ++r) {
    __m256 acc[M];
    for (int m = 0; m < M; ++m) acc[m] = _mm256_setzero_ps();
    const uint8_t* qr = codes + r * nb * cb;
    const uint16_t* dr = scales + r * nb;
    for (int64_t b = 0; b < nb; ++b) {
      const __m256i w = block_codes_avx2<T>(qr + b * cb);
      const float d = _cvtsh_ss(dr[b]);
      for (int m = 0; m < M; ++m) {
        const __m256i xv =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.codes(m) + b * kGgmlBlock));
        const __m256i pairs =
            _mm256_maddubs_epi16(_mm256_sign_epi8(xv, xv), _mm256_sign_epi8(w, xv));
        const __m256 sum = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
        acc[m] = _mm256_fmadd_ps(sum, _mm256_set1_ps(d * x.scale(m, b)), acc[m]);
      }
    }
    for (int m = 0; m < M; ++m) y[m * ldy + r] = sum_avx2(acc[m]);
  }
}
TRI_X86_INTRINSICS_END
#endif

using RowsFn = void (*)(const GgmlQ8Activations&, const uint8_t*, const uint16_t*, int64_t, int64_t,
                        float*, int64_t);

template <GgmlBlockType T, int M>
void rows_scalar_of(const GgmlQ8Activations& x, const uint8_t* codes, const uint16_t* scales,
                    int64_t r0, int64_t r1, float* y, int64_t ldy) {
  rows_scalar<M>(T, x, codes, scales, r0, r1, y, ldy);
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
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
           __builtin_cpu_supports("fma") && cpu_has_f16c();
  if (isa == MatvecIsa::kAvx2)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
#endif
  return isa == MatvecIsa::kScalar;
}

}  // namespace

GgmlQ8Activations::GgmlQ8Activations(GgmlBlockType weight_type, const float* x, int64_t M,
                                     int64_t cols)
    : weight_type_(weight_type), M_(M), cols_(cols) {
  TRI_CHECK(M >= 1, "ggml_block_matvec: ", M, " rows of x (at least 1)");
  TRI_CHECK(cols > 0 && cols % kGgmlBlock == 0, "ggml_block_matvec: ", cols,
            " columns are not whole blocks of ", kGgmlBlock);
  const int64_t nb = blocks(), np = pairs();
  // The weight's codes are offset by 128 (Q8_0, as unsigned bytes) or 8 (Q4_0's nibbles).
  const int32_t offset = weight_type == GgmlBlockType::kQ8_0 ? 128 : 8;
  const bool lanes = M <= kGgmlMatvecMaxRows;
  codes_.reset(new int8_t[static_cast<size_t>(M * np * 64)]);
  block_scales_.resize(static_cast<size_t>(M * nb));
  block_corrections_.resize(static_cast<size_t>(M * nb));
  if (lanes) {
    scale_lanes_.assign(static_cast<size_t>(M * np * 16), 0.0f);
    corrections_.assign(static_cast<size_t>(M * np * 16), 0);
  }
  // Rows are independent: prefill's hundreds of rows are handed out to threads as they ask
  // (bit for bit the same on any thread count).
  parallel_for_dynamic(0, M, std::max<int64_t>(1, 16384 / cols), [&](int64_t m0, int64_t m1) {
    std::vector<uint16_t> bits(static_cast<size_t>(nb));
    for (int64_t m = m0; m < m1; ++m) {
      auto* q = reinterpret_cast<uint8_t*>(codes_.get() + m * np * 64);
      int32_t* corr = block_corrections_.data() + m * nb;
      ggml_quantize_q8_0_row(x + m * cols, cols, q, bits.data(), corr);
      std::fill(q + cols, q + np * 64, uint8_t{0});  // an odd last block's pair
      float* d = block_scales_.data() + m * nb;
      for (int64_t b = 0; b < nb; ++b) {
        d[b] = f16::to_float(bits[static_cast<size_t>(b)]);
        corr[b] *= -offset;  // the codes' sum, made the correction
      }
      if (!lanes) continue;
      for (int64_t b = 0; b < nb; ++b) {
        const int64_t lane = m * np * 16 + (b / 2) * 16 + (b % 2) * 8;
        std::fill_n(scale_lanes_.begin() + lane, 8, d[b]);
        corrections_[static_cast<size_t>(lane)] = corr[b];
      }
    }
  });
}

const char* matvec_isa_name(MatvecIsa isa) {
  switch (isa) {
    case MatvecIsa::kAvx512:
      return "avx512_vnni";
    case MatvecIsa::kAvx2:
      return "avx2";
    case MatvecIsa::kScalar:
      break;
  }
  return "scalar";
}

bool ggml_matvec_supports(MatvecIsa isa) {
  static const bool avx512 = cpu_supports(MatvecIsa::kAvx512),
                    avx2 = cpu_supports(MatvecIsa::kAvx2);
  return isa == MatvecIsa::kAvx512 ? avx512 : isa == MatvecIsa::kAvx2 ? avx2 : true;
}

MatvecIsa ggml_matvec_isa() {
  if (ggml_matvec_supports(MatvecIsa::kAvx512) && kernel_switch(KernelSwitch::kCpuAvx512))
    return MatvecIsa::kAvx512;
  if (ggml_matvec_supports(MatvecIsa::kAvx2)) return MatvecIsa::kAvx2;
  return MatvecIsa::kScalar;
}

void ggml_block_matvec(GgmlBlockType t, MatvecIsa isa, const GgmlQ8Activations& x,
                       const uint8_t* codes, const uint16_t* scales, int64_t r0, int64_t r1,
                       float* y, int64_t ldy) {
  TRI_CHECK(x.weight_type() == t, "ggml_block_matvec: activations prepared for ",
            ggml_block_type_name(x.weight_type()), " weights, given ", ggml_block_type_name(t));
  TRI_CHECK(ggml_matvec_supports(isa), "ggml_block_matvec: this CPU has no ", matvec_isa_name(isa));
  TRI_CHECK(x.M() <= kGgmlMatvecMaxRows, "ggml_block_matvec: ", x.M(), " rows of x (1 to ", kGgmlMatvecMaxRows,
            "; more are ggml_block_gemm's)");
  const auto rows = std::make_integer_sequence<int, kGgmlMatvecMaxRows>();
  const RowsFn fn = t == GgmlBlockType::kQ8_0 ? pick<GgmlBlockType::kQ8_0>(isa, x.M(), rows)
                                              : pick<GgmlBlockType::kQ4_0>(isa, x.M(), rows);
  fn(x, codes, scales, r0, r1, y, ldy);
}

}  // namespace trident::kernels::cpu
