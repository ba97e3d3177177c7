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
// number known when x is quantized: GgmlQ8Activations keeps its negative, and the kernel starts
// each block's 16 sums (one per row of a panel, Note [Sixteen rows a panel] in ggml_panels.cc)
// from it, so the int32 result is exact. The AVX2 path (vpmaddubsw, no VNNI) uses llama.cpp's
// |w| x sign(x, w) for Q8_0 instead, whose pairs of products fit int16 (2 x 127 x 127).

namespace {

// The reference: each block's exact integer sum, scaled by d_w d_x, summed in block order.
template <int M>
void panels_scalar(const GgmlQ8Activations& x, const GgmlPanels& w, int64_t p0, int64_t p1, float* y,
                   int64_t ldy) {
  const int64_t nb = w.blocks();
  for (int64_t r = p0 * kGgmlPanelRows; r < std::min(w.rows, p1 * kGgmlPanelRows); ++r) {
    float acc[M] = {};
    for (int64_t b = 0; b < nb; ++b) {
      const float d = f16::to_float(w.scale(r, b));
      for (int m = 0; m < M; ++m) {
        const int8_t* xq = x.codes(m) + b * kGgmlBlock;
        int32_t s = 0;
        for (int64_t j = 0; j < kGgmlBlock; ++j) s += w.code(r, b, j) * int32_t{xq[j]};
        acc[m] += static_cast<float>(s) * (d * x.scale(m, b));
      }
    }
    for (int m = 0; m < M; ++m) y[m * ldy + r] = acc[m];
  }
}

// The rows of x's arrays a kernel reads.
template <int M>
struct XRows {
  explicit XRows(const GgmlQ8Activations& x) {
    for (int m = 0; m < M; ++m) {
      codes[m] = x.codes(m);
      scales[m] = x.block_scales(m);
      corrections[m] = x.block_corrections(m);
    }
  }
  const int8_t* codes[M];
  const float* scales[M];
  const int32_t* corrections[M];
};

#if defined(__x86_64__)
TRI_X86_INTRINSICS_BEGIN

// How far ahead the weight codes are prefetched, in bytes: the panels are one stream.
constexpr int64_t kPrefetchBytes = 1024;

// Per panel and block, each row of x's int32 sums (16 lanes: the panel's rows) start at its
// correction and take 8 vpdpbusd (Q8_0: 8 vectors with 0x80 flipped, making w + 128 unsigned;
// Q4_0: 4 vectors' low then high nibbles), then one multiply-add in fp32, in block order. One or
// two rows of x split their sums in two chains (even and odd groups) so that a vpdpbusd does not
// wait on the one before; more rows are chains enough.
template <GgmlBlockType T, int M>
TRI_AVX512 void panels_avx512(const GgmlQ8Activations& x, const GgmlPanels& w, int64_t p0, int64_t p1, float* y,
                              int64_t ldy) {
  constexpr int K = M < 3 ? 2 : 1;
  const int64_t nb = w.blocks();
  const XRows<M> xr(x);
  const __m512i low = _mm512_set1_epi8(15), flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t p = p0; p < p1; ++p) {
    __m512 acc[M];
    for (int m = 0; m < M; ++m) acc[m] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* wb = w.block_codes(p, b);
      _mm_prefetch(reinterpret_cast<const char*>(wb + kPrefetchBytes), _MM_HINT_T0);
      __m512i s[M][K];
      for (int m = 0; m < M; ++m) {
        s[m][0] = _mm512_set1_epi32(xr.corrections[m][b]);
        if constexpr (K == 2) s[m][1] = _mm512_setzero_si512();
      }
      if constexpr (T == GgmlBlockType::kQ8_0) {
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
          const __m512i v = _mm512_xor_si512(_mm512_loadu_si512(wb + g * 64), flip);
          for (int m = 0; m < M; ++m)
            s[m][g % K] = _mm512_dpbusd_epi32(
                s[m][g % K], v, _mm512_set1_epi32(ggml_four_codes(xr.codes[m] + b * kGgmlBlock + 4 * g)));
        }
      } else {
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) {
          const __m512i v = _mm512_loadu_si512(wb + g * 64);
          const __m512i lo = _mm512_and_si512(v, low), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
          for (int m = 0; m < M; ++m) {
            const int8_t* xb = xr.codes[m] + b * kGgmlBlock;
            s[m][0] = _mm512_dpbusd_epi32(s[m][0], lo, _mm512_set1_epi32(ggml_four_codes(xb + 4 * g)));
            s[m][K - 1] = _mm512_dpbusd_epi32(s[m][K - 1], hi, _mm512_set1_epi32(ggml_four_codes(xb + 16 + 4 * g)));
          }
        }
      }
      const __m512 dw =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.block_scales(p, b))));
      for (int m = 0; m < M; ++m) {
        const __m512i sum = K == 2 ? _mm512_add_epi32(s[m][0], s[m][K - 1]) : s[m][0];
        acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(dw, _mm512_set1_ps(xr.scales[m][b])),
                                 acc[m]);
      }
    }
    const int64_t n = std::min(kGgmlPanelRows, w.rows - p * kGgmlPanelRows);
    const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1);
    for (int m = 0; m < M; ++m) _mm512_mask_storeu_ps(y + m * ldy + p * kGgmlPanelRows, mask, acc[m]);
  }
}

TRI_AVX2 inline __m256 zero_avx2() { return _mm256_setzero_ps(); }

// Half h of each panel (rows 8h .. 8h + 7: 32 bytes of each 64-byte vector) at a time. No
// vpdpbusd: Q8_0 by llama.cpp's |w| x sign(x, w) (vpmaddubsw's pairs fit int16: 2 x 127 x 127),
// Q4_0's unsigned nibbles by x directly (2 x 15 x 128), its sums starting at x's correction;
// pairs widened by vpmaddwd.
template <GgmlBlockType T, int M>
TRI_AVX2 void panels_avx2(const GgmlQ8Activations& x, const GgmlPanels& w, int64_t p0, int64_t p1, float* y,
                          int64_t ldy) {
  const int64_t nb = w.blocks();
  const XRows<M> xr(x);
  const __m256i ones = _mm256_set1_epi16(1), low = _mm256_set1_epi8(15);
  for (int64_t p = p0; p < p1; ++p)
    for (int64_t h = 0; h < 2; ++h) {
      const int64_t r0 = p * kGgmlPanelRows + h * 8;
      if (r0 >= w.rows) break;
      __m256 acc[M];
      for (int m = 0; m < M; ++m) acc[m] = zero_avx2();
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* wb = w.block_codes(p, b) + h * 32;
        __m256i s[M];
        for (int m = 0; m < M; ++m)
          s[m] = T == GgmlBlockType::kQ8_0 ? _mm256_setzero_si256() : _mm256_set1_epi32(xr.corrections[m][b]);
        if constexpr (T == GgmlBlockType::kQ8_0) {
          for (int g = 0; g < 8; ++g) {
            const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + g * 64));
            const __m256i av = _mm256_sign_epi8(v, v);
            for (int m = 0; m < M; ++m) {
              const __m256i a = _mm256_set1_epi32(ggml_four_codes(xr.codes[m] + b * kGgmlBlock + 4 * g));
              s[m] = _mm256_add_epi32(s[m], _mm256_madd_epi16(_mm256_maddubs_epi16(av, _mm256_sign_epi8(a, v)), ones));
            }
          }
        } else {
          for (int g = 0; g < 4; ++g) {
            const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + g * 64));
            const __m256i lo = _mm256_and_si256(v, low), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
            for (int m = 0; m < M; ++m) {
              const int8_t* xb = xr.codes[m] + b * kGgmlBlock;
              const __m256i pl = _mm256_maddubs_epi16(lo, _mm256_set1_epi32(ggml_four_codes(xb + 4 * g)));
              const __m256i ph = _mm256_maddubs_epi16(hi, _mm256_set1_epi32(ggml_four_codes(xb + 16 + 4 * g)));
              s[m] = _mm256_add_epi32(s[m], _mm256_madd_epi16(_mm256_add_epi16(pl, ph), ones));
            }
          }
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.block_scales(p, b) + h * 8)));
        for (int m = 0; m < M; ++m)
          acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[m]), _mm256_mul_ps(dw, _mm256_set1_ps(xr.scales[m][b])), acc[m]);
      }
      const int64_t n = std::min<int64_t>(8, w.rows - r0);
      alignas(32) float out[8];
      for (int m = 0; m < M; ++m) {
        _mm256_store_ps(out, acc[m]);
        std::copy_n(out, n, y + m * ldy + r0);
      }
    }
}
TRI_X86_INTRINSICS_END
#endif

using PanelsFn = void (*)(const GgmlQ8Activations&, const GgmlPanels&, int64_t, int64_t, float*, int64_t);

// The kernel of (isa, type, M), from tables of the templates' instances.
template <GgmlBlockType T, int... Ms>
PanelsFn pick(MatvecIsa isa, int64_t M, std::integer_sequence<int, Ms...>) {
  static constexpr PanelsFn scalar[] = {&panels_scalar<Ms + 1>...};
#if defined(__x86_64__)
  static constexpr PanelsFn avx512[] = {&panels_avx512<T, Ms + 1>...};
  static constexpr PanelsFn avx2[] = {&panels_avx2<T, Ms + 1>...};
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

GgmlQ8Activations::GgmlQ8Activations(GgmlBlockType weight_type, const float* x, int64_t M, int64_t cols)
    : weight_type_(weight_type), M_(M), cols_(cols) {
  TRI_CHECK(M >= 1, "ggml_block_matvec: ", M, " rows of x (at least 1)");
  TRI_CHECK(cols > 0 && cols % kGgmlBlock == 0, "ggml_block_matvec: ", cols,
            " columns are not whole blocks of ", kGgmlBlock);
  const int64_t nb = blocks();
  // The weight's codes are offset by 128 (Q8_0, as unsigned bytes) or 8 (Q4_0's nibbles).
  const int32_t offset = weight_type == GgmlBlockType::kQ8_0 ? 128 : 8;
  codes_.reset(new int8_t[static_cast<size_t>(M * cols)]);
  block_scales_.resize(static_cast<size_t>(M * nb));
  block_corrections_.resize(static_cast<size_t>(M * nb));
  // Rows are independent: prefill's hundreds of rows are handed out to threads as they ask
  // (bit for bit the same on any thread count).
  parallel_for_dynamic(0, M, std::max<int64_t>(1, 16384 / cols), [&](int64_t m0, int64_t m1) {
    std::vector<uint16_t> bits(static_cast<size_t>(nb));
    for (int64_t m = m0; m < m1; ++m) {
      int32_t* corr = block_corrections_.data() + m * nb;
      ggml_quantize_q8_0_row(x + m * cols, cols, reinterpret_cast<uint8_t*>(codes_.get() + m * cols), bits.data(),
                             corr);
      float* d = block_scales_.data() + m * nb;
      for (int64_t b = 0; b < nb; ++b) {
        d[b] = f16::to_float(bits[static_cast<size_t>(b)]);
        corr[b] *= -offset;  // the codes' sum, made the correction
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

void ggml_block_matvec(MatvecIsa isa, const GgmlQ8Activations& x, const GgmlPanels& w, int64_t p0, int64_t p1,
                       float* y, int64_t ldy) {
  TRI_CHECK(x.weight_type() == w.type, "ggml_block_matvec: activations prepared for ",
            ggml_block_type_name(x.weight_type()), " weights, given ", ggml_block_type_name(w.type));
  TRI_CHECK(x.cols() == w.cols, "ggml_block_matvec: x has ", x.cols(), " columns, the weight ", w.cols);
  TRI_CHECK(ggml_matvec_supports(isa), "ggml_block_matvec: this CPU has no ", matvec_isa_name(isa));
  TRI_CHECK(x.M() <= kGgmlMatvecMaxRows, "ggml_block_matvec: ", x.M(), " rows of x (1 to ", kGgmlMatvecMaxRows,
            "; more are ggml_block_gemm's)");
  TRI_CHECK(0 <= p0 && p0 <= p1 && p1 <= w.panels(), "ggml_block_matvec: panels [", p0, ", ", p1, ") of ",
            w.panels());
  const auto rows = std::make_integer_sequence<int, kGgmlMatvecMaxRows>();
  const PanelsFn fn = w.type == GgmlBlockType::kQ8_0 ? pick<GgmlBlockType::kQ8_0>(isa, x.M(), rows)
                                                     : pick<GgmlBlockType::kQ4_0>(isa, x.M(), rows);
  fn(x, w, p0, p1, y, ldy);
}

}  // namespace trident::kernels::cpu
