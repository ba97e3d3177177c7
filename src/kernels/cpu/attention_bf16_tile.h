// bf16 tile products for the tiled attention (attention_forward.cc, attention_backward.cc) on
// CPUs with AVX512-BF16: operands packed as pairs of bf16, products accumulated in f32 by
// vdpbf16ps. Internal to kernels/cpu, like attention_tile.h.
//
// Note [bf16 tile products]
// The f32 kernels convert bf16 inputs to f32 tiles and multiply those with FMAs. On a CPU with
// AVX512-BF16, vdpbf16ps multiplies 32 bf16 pairs and adds them to 16 f32 lanes in one
// instruction: twice the FMA's multiply-adds per instruction, the same rate the bf16 GEMMs
// run at (Note [Even block counts] in matmul.cc has their numbers). So with bf16 inputs every
// product of the forward and backward runs in bf16 x bf16 -> f32, as FlashAttention-2 does on
// GPUs:
//  * q, k, v and dout are bf16 already: their products are exact in f32 (8-bit significands);
//    only the f32 sums round, two terms at a time rather than one.
//  * P (forward and backward) and dS (backward) are f32 and are rounded to bf16 before their
//    product: a relative error of at most 2^-9 per term, far inside the op suite's bf16
//    tolerance (8 u (|r| + sqrt(K) rms(r)), u = 2^-8), and below the rounding of the bf16
//    output itself. The softmax statistics (max, sum, logsumexp), the online rescaling, dS's
//    P (dP - delta) and every accumulator stay in f32.
//  * scale multiplies the f32 scores after the product (not q before it, Note [Scale folded
//    into q]): q * scale would round again in bf16 unless scale is a power of two; dk takes
//    its factor scale when it is stored, as dq does.
// The bits differ from the f32-tile path's (a different summation), so a bf16 model trains
// with other bits on a CPU without the instruction; f32 and f64 never take this path. The
// op suite runs this path on machines that have it.
//
// Layouts. vdpbf16ps multiplies lane j's pair of A with lane j's pair of B, so a product
// C (M, N) = A (M, K) B (K, N) wants
//   A as pair words a(m, p) = (A[m][2p], A[m][2p+1]): row-major bf16 rows of A, or, for the
//     transposed form (kTransA), A32[p * lda + m] built from rows 2p and 2p+1 of A^T;
//   B in "VNNI" form B32[p * ldb + n] = (B[2p][n], B[2p+1][n]): rows 2p, 2p+1 interleaved.
// The even element sits in the low 16 bits. K is padded to even with zero pairs, and every
// padding element of both operands is zero, so padding contributes exactly 0.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/half.h"
#include "core/kernel_switches.h"
#include "kernels/cpu/attention_tile.h"

#if defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>
#define TRIDENT_ATTENTION_BF16_DOT 1
#else
#define TRIDENT_ATTENTION_BF16_DOT 0
#endif

namespace trident::kernels::cpu::attention_tile {

// Whether bf16 attention takes this path: built for a CPU with AVX512-BF16 and the
// kernels.cpu_bf16_attention switch on (core/kernel_switches.h).
inline bool bf16_tile_products() {
  return TRIDENT_ATTENTION_BF16_DOT && kernel_switch(KernelSwitch::kCpuBf16Attention);
}

using Pair = uint32_t;  // two bf16: the even index in the low half

// Pairs needed for n bf16 values.
inline int64_t pairs(int64_t n) { return (n + 1) / 2; }

// dst (rows, ld pair words) = rows [0, rows) of a bf16 head (row stride `stride`, HS values
// each) as pair words; pairs [HS / 2, ld) zeroed (the odd HS's last pair gets a zero high half).
inline void load_pair_rows(Pair* dst, int64_t ld, const bf16* src, int64_t stride, int64_t rows,
                           int64_t HS) {
  for (int64_t r = 0; r < rows; ++r) {
    Pair* d = dst + r * ld;
    std::memset(d, 0, static_cast<size_t>(ld) * sizeof(Pair));
    std::memcpy(d, src + r * stride, static_cast<size_t>(HS) * sizeof(bf16));
  }
}

// dst (pairs(rows), ld) in VNNI form from rows [0, rows) of a bf16 head:
// dst[p * ld + d] = (row 2p [d], row 2p+1 [d]); d in [HS, ld) and the row past an odd `rows`
// are zero.
inline void load_vnni(Pair* dst, int64_t ld, const bf16* src, int64_t stride, int64_t rows,
                      int64_t HS) {
  for (int64_t p = 0; p < pairs(rows); ++p) {
    const bf16* even = src + 2 * p * stride;
    Pair* d = dst + p * ld;
    if (2 * p + 1 < rows) {  // two loops without a branch inside, so that both vectorize
      const bf16* odd = even + stride;
      for (int64_t c = 0; c < HS; ++c) d[c] = static_cast<Pair>(even[c].bits) | static_cast<Pair>(odd[c].bits) << 16;
    } else {
      for (int64_t c = 0; c < HS; ++c) d[c] = static_cast<Pair>(even[c].bits);
    }
    std::memset(d + HS, 0, static_cast<size_t>(ld - HS) * sizeof(Pair));
  }
}

// dst (pairs(HS), ld) = the transpose of rows [0, n) of a bf16 head as pair words:
// dst[p * ld + c] = (row c [2p], row c [2p+1]); columns [n, ld) zero.
inline void load_pair_columns(Pair* dst, int64_t ld, const bf16* src, int64_t stride, int64_t n,
                              int64_t HS) {
  const int64_t P = pairs(HS), whole = HS / 2;
  for (int64_t p = 0; p < P; ++p) std::memset(dst + p * ld + n, 0, static_cast<size_t>(ld - n) * sizeof(Pair));
  for (int64_t c = 0; c < n; ++c) {
    const bf16* s = src + c * stride;
    // A whole pair is the two bf16 as they sit in memory: one 32-bit word (little-endian x86
    // and ARM put the even element in the low half, as vdpbf16ps wants).
    for (int64_t p = 0; p < whole; ++p) std::memcpy(dst + p * ld + c, s + 2 * p, sizeof(Pair));
    if (whole < P) dst[whole * ld + c] = static_cast<Pair>(s[HS - 1].bits);
  }
}

#if TRIDENT_ATTENTION_BF16_DOT

// What a tile product does with the C it writes: C = A B (kSet), C += A B (kAdd), or
// C = row_scale[r] C + A B (kRescale: the forward's online-softmax rescaling of its output
// accumulator, Note [Online softmax] in attention_forward.cc). kAdd and kRescale sum into C
// directly, one pair at a time: with bf16 inputs and outputs the f32 sums' rounding is far
// below the outputs' (Note [bf16 tile products]), so the f32 kernels' blocked accumulation
// (Note [Blocked accumulation]) buys nothing here.
enum class Into { kSet, kAdd, kRescale };

// One kRows x 32 register tile of C (see Into) with A B over P pairs (see the layouts above).
template <bool kTransA, Into kInto, int kRows>
inline void dot_register_tile(float* C, int64_t ldc, const Pair* A, int64_t lda, const Pair* B,
                              int64_t ldb, int64_t P, const float* row_scale) {
  __m512 acc[kRows][2];
  for (int r = 0; r < kRows; ++r) {
    if constexpr (kInto == Into::kSet) {
      acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    } else {
      acc[r][0] = _mm512_loadu_ps(C + r * ldc);
      acc[r][1] = _mm512_loadu_ps(C + r * ldc + 16);
      if constexpr (kInto == Into::kRescale) {
        const __m512 f = _mm512_set1_ps(row_scale[r]);
        acc[r][0] = _mm512_mul_ps(acc[r][0], f);
        acc[r][1] = _mm512_mul_ps(acc[r][1], f);
      }
    }
  }
  for (int64_t p = 0; p < P; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(B + p * ldb);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(B + p * ldb + 16);
    for (int r = 0; r < kRows; ++r) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(static_cast<int>(kTransA ? A[p * lda + r] : A[r * lda + p]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], a, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], a, b1);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    _mm512_storeu_ps(C + r * ldc, acc[r][0]);
    _mm512_storeu_ps(C + r * ldc + 16, acc[r][1]);
  }
}

template <bool kTransA, Into kInto, int kRows>
inline void dot_register_tile_edge(int64_t rows, float* C, int64_t ldc, const Pair* A, int64_t lda,
                                   const Pair* B, int64_t ldb, int64_t P, const float* row_scale) {
  if constexpr (kRows > 0) {
    if (rows == kRows) return dot_register_tile<kTransA, kInto, kRows>(C, ldc, A, lda, B, ldb, P, row_scale);
    dot_register_tile_edge<kTransA, kInto, kRows - 1>(rows, C, ldc, A, lda, B, ldb, P, row_scale);
  }
}

// C (M, N) (see Into) with op(A) B, bf16 pair operands (layouts above), f32 C; N a multiple
// of 32. op(A) pairs: A[m * lda + p], or with kTransA A[p * lda + m]. row_scale (M) only for
// kRescale. Each element of C is summed over p in increasing order, whatever the tile's
// place: bits independent of the schedule.
template <bool kTransA, Into kInto = Into::kSet>
void tile_dot(float* C, int64_t ldc, const Pair* A, int64_t lda, const Pair* B, int64_t ldb,
              int64_t M, int64_t N, int64_t P, const float* row_scale = nullptr) {
  constexpr int kRows = 8;
  for (int64_t j = 0; j < N; j += 32) {
    int64_t i = 0;
    for (; i + kRows <= M; i += kRows)
      dot_register_tile<kTransA, kInto, kRows>(C + i * ldc + j, ldc, kTransA ? A + i : A + i * lda, lda,
                                               B + j, ldb, P, row_scale ? row_scale + i : nullptr);
    if (i < M)
      dot_register_tile_edge<kTransA, kInto, kRows - 1>(M - i, C + i * ldc + j, ldc,
                                                        kTransA ? A + i : A + i * lda, lda, B + j, ldb, P,
                                                        row_scale ? row_scale + i : nullptr);
  }
}

// Two f32 rows of 16 rounded to bf16 and interleaved: the 16 pair words (even[i], odd[i]).
inline __m512i interleave_pairs(__m512 even, __m512 odd) {
  // cvtne2ps gives [even's 16 values, odd's 16 values]; this permutation interleaves them.
  alignas(64) static constexpr uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,
                                                           21, 6, 22, 7, 23, 8,  24, 9,  25, 10, 26,
                                                           11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(odd, even);
  return _mm512_permutexvar_epi16(_mm512_load_si512(kInterleave), both);
}

// 32 f32 values (lo: the first 16) rounded to bf16 in order: 16 pair words (v[2p], v[2p+1]).
inline __m512i in_order_pairs(__m512 lo, __m512 hi) { return (__m512i)_mm512_cvtne2ps_pbh(hi, lo); }

// dst[p * ld + c] = (bf16(src[2p][c]), bf16(src[2p+1][c])) for p < pairs(rows), c < n (a
// multiple of 16): rows 2p and 2p+1 of an f32 tile (row stride src_ld) rounded to bf16 and
// interleaved; the row past an odd `rows` is zero. The A operand of a kTransA product.
inline void round_row_pairs(Pair* dst, int64_t ld, const float* src, int64_t src_ld, int64_t rows,
                            int64_t n) {
  for (int64_t p = 0; p < pairs(rows); ++p) {
    const float* even = src + 2 * p * src_ld;
    const bool has_odd = 2 * p + 1 < rows;
    for (int64_t c = 0; c < n; c += 16) {
      const __m512 odd = has_odd ? _mm512_loadu_ps(even + src_ld + c) : _mm512_setzero_ps();
      _mm512_storeu_si512(dst + p * ld + c, interleave_pairs(_mm512_loadu_ps(even + c), odd));
    }
  }
}

// Note [exp for bf16 probabilities]
// e^x of 16 lanes for the bf16 kernels' softmax. math::exp (fast_math.h) builds 2^n from the
// exponent bits with two multiplies and clamps by select; AVX-512's vscalefps does 2^n, with
// underflow to 0 and overflow to inf, in one instruction, and the polynomial is one degree
// shorter (Taylor to r^6 on |r| <= ln2 / 2: relative error ~2e-7, a few f32 ulp, against the
// 2^-9 of the bf16 rounding every probability goes through next). On Zen 4, whose 512-bit
// instructions take two passes through 256-bit units, the exponential was most of the
// softmax's time. x = -inf (a masked score) gives 0: x is clamped at -120, far below
// the smallest subnormal's log, before it is split.
inline __m512 exp_bf16_probabilities(__m512 x) {
  // The masked forms (all lanes) throughout: GCC 12 warns (-Wmaybe-uninitialized) on the
  // unmasked max, min, roundscale and scalef, whose headers pass an undefined vector.
  constexpr __mmask16 all = 0xffff;
  x = _mm512_mask_max_ps(x, all, x, _mm512_set1_ps(-120.0f));
  x = _mm512_mask_min_ps(x, all, x, _mm512_set1_ps(89.0f));
  const __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f));
  const __m512 n = _mm512_mask_roundscale_ps(t, all, t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440054713771e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_mask_scalef_ps(p, all, p, n);
}

// x[i] *= scale for i < n (a multiple of 16).
inline void scale_scores(float* x, int64_t n, float scale) {
  for (int64_t i = 0; i < n; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), _mm512_set1_ps(scale)));
}

#endif  // TRIDENT_ATTENTION_BF16_DOT

}  // namespace trident::kernels::cpu::attention_tile
