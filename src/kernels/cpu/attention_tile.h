// Building blocks of the tiled attention kernels (attention_forward.cc, attention_backward.cc):
// the tile sizes, a register-blocked product of small tiles, exp on vectors, the row
// operations of the softmax, and loading (T, HS) rows of a head into padded tiles.
// Everything here works on tiles in the accumulation type Acc (float, or double for f64
// inputs). Internal to kernels/cpu; it is not a general GEMM (see kernels/cpu/matmul.h).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/allocator.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/fast_math.h"

namespace trident::kernels::cpu::attention_tile {

// Note [Attention tile sizes]
// Why 64 x 64 tiles (kBr query rows by kBc key rows)? In f32 one 64x64 tile is 16 KiB, so
// the forward's working set for HS = 64 (Q^T, K, V, S^T/P^T, the output accumulator and one
// tile's P V: six tiles, 96 KiB) and the backward's (about seven, 112 KiB) sit in a core's
// L2 (512 KiB on the Zen 3 machines we measure on, 1-2 MiB on newer x86) while tile_matmul
// streams its operands through L1. Measured single-core on 2 Zen 3 cores: tile_matmul runs at ~70
// GFLOP/s for 48, 64, 96 and 128 (roughly 2/3 of the FMA peak), so the size is chosen by
// the other costs: larger tiles waste more work on the causal diagonal (half of every
// diagonal tile is masked) and give fewer parallel tasks; smaller ones pay the per-tile
// overhead (loads, the softmax row bookkeeping, micro-kernel edges) more often.
// Widths that tile_matmul produces (Bc, and HS padded to HSp) are multiples of
// kColAlign, its column block; padding columns are zero-filled and never stored.
inline constexpr int64_t kBr = 64;
inline constexpr int64_t kBc = 64;
static_assert(kBc == kAttentionKeyTile, "a paged cache's blocks hold whole key tiles (kernels/cpu/attention.h)");

inline int64_t ceil_div(int64_t n, int64_t d) { return (n + d - 1) / d; }
inline int64_t round_up(int64_t n, int64_t m) { return ceil_div(n, m) * m; }

// Note [Explicit SIMD through vector types]
// The tile products must run near the FMA peak, and plain nested loops do not get there:
// g++ -O3 -march=native keeps a float acc[6][16] in memory and reaches 14 GFLOP/s on a
// 64x64x64 product (2 GFLOP/s when A is read transposed). GCC/Clang vector types (not
// intrinsics: the same code compiles for AVX2, SSE2 or NEON, see kVectorBytes) let us say
// "these 12 accumulators live in registers". With them, a 6x16
// register tile reaches ~64-70 GFLOP/s on one Zen 3 core, the same as OpenBLAS's sgemm
// (69 GFLOP/s for NN, but 46 for NT and 37 for TN, the forms attention needs; plus a
// library call per 64x64 tile), so the kernels use tile_matmul and never call BLAS.
// Vectors are as wide as the target's registers: 64 bytes with AVX-512 (32 registers), 32
// with AVX (16 registers), else 16 (the x86-64 baseline's SSE2, or NEON). The register tile
// keeps 12-16 accumulators. Each element is still summed over k in order, one FMA per
// term, so the width changes the speed, not the bits. On Zen 5 (one thread, bench/attention_bench,
// GPT-2 124M's shape) 64-byte vectors took forward + backward from 39 to 73 GFLOP/s.
#if defined(__AVX512F__)
inline constexpr int kVectorBytes = 64;
#elif defined(__AVX__)
inline constexpr int kVectorBytes = 32;
#else
inline constexpr int kVectorBytes = 16;
#endif
// tile_matmul's column block (Note [Attention tile sizes]): two f32 vectors with AVX-512.
inline constexpr int64_t kColAlign = kVectorBytes == 64 ? 32 : 16;

template <class Acc>
struct Simd;
template <>
struct Simd<float> {
  typedef float V __attribute__((vector_size(kVectorBytes)));
  typedef int32_t Mask __attribute__((vector_size(kVectorBytes)));  // lane masks and integers
  using Int = int32_t;
  static constexpr int kLanes = kVectorBytes / 4;
  // Rows of tile_matmul's register tile: 8 x 2 accumulators with AVX-512 (32 registers),
  // 6 x 2 with AVX (16), 4 x 4 otherwise.
  static constexpr int kRows = kVectorBytes == 64 ? 8 : kVectorBytes == 32 ? 6 : 4;
};
template <>
struct Simd<double> {
  typedef double V __attribute__((vector_size(kVectorBytes)));
  typedef int64_t Mask __attribute__((vector_size(kVectorBytes)));
  using Int = int64_t;
  static constexpr int kLanes = kVectorBytes / 8;
  static constexpr int kRows = kVectorBytes == 16 ? 2 : 3;  // 3 x 4 (AVX-512, AVX) or 2 x 8 accumulators
};

template <class Acc>
using Vec = typename Simd<Acc>::V;

template <class Acc>
inline Vec<Acc> load(const Acc* p) {
  Vec<Acc> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class Acc>
inline void store(Acc* p, Vec<Acc> v) {
  std::memcpy(p, &v, sizeof v);
}
template <class Acc>
inline Vec<Acc> splat(Acc x) {
  return Vec<Acc>{} + x;
}

// One kRows x kColAlign register tile of C = op(A) B over K, or with kAddTo C += it: the product
// is summed from zero in registers and then added to C, as Note [Blocked accumulation] asks.
template <bool kTransA, bool kAddTo, int kRows, class Acc>
inline void register_tile(Acc* C, int64_t ldc, const Acc* A, int64_t lda, const Acc* B,
                          int64_t ldb, int64_t K) {
  constexpr int kLanes = Simd<Acc>::kLanes;
  constexpr int kVecs = kColAlign / kLanes;
  Vec<Acc> acc[kRows][kVecs] = {};
  for (int64_t k = 0; k < K; ++k) {
    Vec<Acc> b[kVecs];
    for (int c = 0; c < kVecs; ++c) b[c] = load(B + k * ldb + c * kLanes);
    for (int r = 0; r < kRows; ++r) {
      const Acc a = kTransA ? A[k * lda + r] : A[r * lda + k];
      for (int c = 0; c < kVecs; ++c) acc[r][c] += a * b[c];
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kVecs; ++c) {
      Acc* out = C + r * ldc + c * kLanes;
      store(out, kAddTo ? load(out) + acc[r][c] : acc[r][c]);
    }
}

// The last `rows` (< kRows) rows of a column block.
template <bool kTransA, bool kAddTo, int kRows, class Acc>
inline void register_tile_edge(int64_t rows, Acc* C, int64_t ldc, const Acc* A, int64_t lda,
                               const Acc* B, int64_t ldb, int64_t K) {
  if constexpr (kRows > 0) {
    if (rows == kRows) return register_tile<kTransA, kAddTo, kRows>(C, ldc, A, lda, B, ldb, K);
    register_tile_edge<kTransA, kAddTo, kRows - 1>(rows, C, ldc, A, lda, B, ldb, K);
  }
}

// C (M, N) = op(A) (M, K) @ B (K, N), or with kAddTo C += that product (summed from zero, then
// added). op(A) is A (M, K) with row stride lda, or with kTransA the transpose of A (K, M).
// Row-major with row strides ldc/lda/ldb; N must be a multiple of kColAlign. Each element of
// C is summed over k in increasing order, so the result does not depend on where the tile sits
// in memory.
template <bool kTransA, bool kAddTo, class Acc>
void tile_matmul(Acc* C, int64_t ldc, const Acc* A, int64_t lda, const Acc* B, int64_t ldb,
                 int64_t M, int64_t N, int64_t K) {
  constexpr int kRows = Simd<Acc>::kRows;
  for (int64_t j = 0; j < N; j += kColAlign) {
    int64_t i = 0;
    for (; i + kRows <= M; i += kRows)
      register_tile<kTransA, kAddTo, kRows>(C + i * ldc + j, ldc, kTransA ? A + i : A + i * lda,
                                            lda, B + j, ldb, K);
    if (i < M)
      register_tile_edge<kTransA, kAddTo, kRows - 1>(M - i, C + i * ldc + j, ldc,
                                                     kTransA ? A + i : A + i * lda, lda,
                                                     B + j, ldb, K);
  }
}

// Note [Causal tiles trimmed]
// On a tile that the causal diagonal crosses, key c is seen only by queries r >= c - diag (diag:
// the first query's position less the first key's), so part of each product there is work for
// nothing: the scores S^T of keys no query of a column block sees (masked to -inf next), and in
// P V the terms of keys a row block's queries do not see (P = e^-inf = 0 exactly). The two
// products below leave those out: every score and every sum they do compute is the same sum in
// the same order as tile_matmul's, and the terms left out of P V are exact zeros (adding +-0 to
// a sum that starts at +0 changes no bit), so the bits are the plain products'. With prefill's
// 64 x 64 tiles a diagonal tile's S^T drops a quarter of its register tiles and its P V about
// 40% of its terms; a prompt of 128 tokens has two diagonal tiles of three per head.

// S^T (M keys, N queries) = A (M, K) B (K, N) as tile_matmul<false, false>, where key i is seen
// only by queries >= i - diag: each column block's rows past the last key its queries see are
// not computed but set to -inf (what the causal mask makes them).
template <class Acc>
void causal_scores(Acc* C, int64_t ldc, const Acc* A, int64_t lda, const Acc* B, int64_t ldb, int64_t M,
                   int64_t N, int64_t K, int64_t diag) {
  for (int64_t j = 0; j < N; j += kColAlign) {
    const int64_t rows = std::clamp<int64_t>(j + kColAlign + diag, 0, M);
    tile_matmul<false, false>(C + j, ldc, A, lda, B + j, ldb, rows, kColAlign, K);
    for (int64_t i = rows; i < M; ++i)
      std::fill(C + i * ldc + j, C + i * ldc + j + kColAlign, -std::numeric_limits<Acc>::infinity());
  }
}

// C (M queries, N) = A^T B as tile_matmul<true, false> (A: P^T, K keys by M queries), where
// query r sees only keys <= r + diag: each row block sums only the keys its last query sees
// (all others' P are 0).
template <class Acc>
void causal_probabilities_times_values(Acc* C, int64_t ldc, const Acc* A, int64_t lda, const Acc* B, int64_t ldb,
                                       int64_t M, int64_t N, int64_t K, int64_t diag) {
  constexpr int kRows = Simd<Acc>::kRows;
  for (int64_t j = 0; j < N; j += kColAlign)
    for (int64_t i = 0; i < M; i += kRows) {
      const int64_t rows = std::min<int64_t>(kRows, M - i), keys = std::clamp<int64_t>(i + rows + diag, 0, K);
      register_tile_edge<true, false, kRows>(rows, C + i * ldc + j, ldc, A + i, lda, B + j, ldb, keys);
    }
}

// e^x lane by lane, with math::exp (Note [Vectorizable float math] in fast_math.h): for f32 a
// polynomial that the lane loop turns into vector code, for f64 the C library.
template <class Acc>
inline Vec<Acc> exp_lanes(Vec<Acc> x) {
  constexpr int kLanes = Simd<Acc>::kLanes;
  Acc lane[kLanes];
  store(lane, x);
  for (int l = 0; l < kLanes; ++l) lane[l] = math::exp(lane[l]);
  return load(lane);
}

// row[c] = -inf outside [begin, end), over n columns (a multiple of the lane count): the
// causal mask of a tile row. A no-op when [begin, end) covers the row.
template <class Acc>
inline void mask_outside(Acc* row, int64_t n, int64_t begin, int64_t end) {
  constexpr int kLanes = Simd<Acc>::kLanes;
  using Mask = typename Simd<Acc>::Mask;
  using Int = typename Simd<Acc>::Int;
  if (begin <= 0 && end >= n) return;
  Mask lane;
  for (int l = 0; l < kLanes; ++l) lane[l] = l;
  const Vec<Acc> minus_inf = splat(-std::numeric_limits<Acc>::infinity());
  for (int64_t c = 0; c < n; c += kLanes) {
    const Mask index = lane + static_cast<Int>(c);
    const Mask shown = (index >= static_cast<Int>(begin)) & (index < static_cast<Int>(end));
    store(row + c, shown ? load(row + c) : minus_inf);
  }
}

// row[c] = e^(row[c] - shift) over the kBc columns of a tile row.
template <class Acc>
inline void exp_shifted(Acc* row, Acc shift) {
  for (int64_t c = 0; c < kBc; c += Simd<Acc>::kLanes)
    store(row + c, exp_lanes<Acc>(load(row + c) - shift));
}

// dst (rows, ld) = scale * rows [0, rows) of a head, src pointing at the first (row stride
// `stride`, HS unit-stride values each), converted to Acc; columns [HS, ld) zeroed.
template <class T, class Acc>
void load_rows(Acc* dst, int64_t ld, const T* src, int64_t stride, int64_t rows, int64_t HS,
               Acc scale = Acc(1)) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* s = src + r * stride;
    Acc* d = dst + r * ld;
    for (int64_t c = 0; c < HS; ++c) d[c] = static_cast<Acc>(s[c]) * scale;
    std::fill(d + HS, d + ld, Acc(0));
  }
}

// dst (HS, ld) = scale * the transpose of rows [0, n) of a head: dst[d * ld + c] = row c's
// element d; columns [n, ld) zeroed.
template <class T, class Acc>
void load_rows_transposed(Acc* dst, int64_t ld, const T* src, int64_t stride, int64_t n,
                          int64_t HS, Acc scale = Acc(1)) {
  for (int64_t d = 0; d < HS; ++d) std::fill(dst + d * ld + n, dst + (d + 1) * ld, Acc(0));
  for (int64_t c = 0; c < n; ++c) {
    const T* s = src + c * stride;
    for (int64_t d = 0; d < HS; ++d) dst[d * ld + c] = static_cast<Acc>(s[d]) * scale;
  }
}

// rows [0, rows) of a head (row stride `stride`) = src (rows, ld) * scale, rounded to T.
template <class T, class Acc>
void store_rows(T* dst, int64_t stride, const Acc* src, int64_t ld, int64_t rows, int64_t HS,
                Acc scale) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < HS; ++c) dst[r * stride + c] = static_cast<T>(src[r * ld + c] * scale);
}

// Note [Scale folded into q]
// Both directions multiply q by `scale` as they load it into a tile, so the scores come
// out of the tile product already scaled: no pass over every score tile just to scale it
// (only diagonal tiles are touched again, to mask), and in the backward
// dK = scale dS^T Q = dS^T (scale Q) needs no factor of its own. The cost is one rounding of
// each q * scale, exact when scale is a power of two (HS = 16, 64, 256 by default).

// Note [Blocked accumulation]
// Sums over the sequence (P V over keys in the forward; dv, dk over queries and dq over keys
// in the backward) are accumulated one tile at a time: each tile's product is summed from
// zero and then added to the running sum, rather than added straight into it row by row. A
// long f32 sum whose partial sums are as large as its result (dv of the first keys under the
// causal mask: every query attends to them) loses ~u sqrt(T) |result| when summed row by row; in blocks it is ~u (sqrt(kBr) + sqrt(T / kBr)) |result|. Measured at
// T = 1024, HS = 64 against the f64 backward: the worst dv error went from 1.5x the op
// suite's tolerance to well inside it. The backward adds each product as tile_matmul stores
// it (kAddTo: the same bits as a product tile added afterwards, without writing and reading
// one); the forward adds it with the online softmax's rescaling.

// Note [Balancing causal tiles]
// Under the causal mask, query tile i sees i + 1 key tiles, so work grows linearly along a
// head. parallel_for hands each thread one contiguous range of tasks; numbering a head's
// tiles 0, n-1, 1, n-2, ... puts cheap and expensive tiles next to each other, so any
// contiguous range has about the average cost. The order changes only who computes a tile,
// never how: the bits do not depend on it.
inline int64_t balanced_tile(int64_t task, int64_t n) {
  return task % 2 == 0 ? task / 2 : n - 1 - task / 2;
}

// N scratch arrays of Acc carved out of one host_allocator() block (64-byte aligned each).
template <class Acc, size_t N>
class TileBuffers {
 public:
  explicit TileBuffers(const std::array<int64_t, N>& sizes) {
    std::array<int64_t, N> offsets{};
    int64_t total = 0;
    for (size_t i = 0; i < N; ++i) {
      offsets[i] = total;
      total += round_up(std::max<int64_t>(sizes[i], 1), 64 / static_cast<int64_t>(sizeof(Acc)));
    }
    block_ = host_allocator().allocate(static_cast<size_t>(total) * sizeof(Acc),
                                       MemoryCategory::kActivation);
    for (size_t i = 0; i < N; ++i) arrays_[i] = static_cast<Acc*>(block_.get()) + offsets[i];
  }
  Acc* operator[](size_t i) const { return arrays_[i]; }
  // The arrays from i on, for code that takes a run of them.
  Acc* const* from(size_t i) const { return arrays_.data() + i; }

 private:
  DataPtr block_;
  std::array<Acc*, N> arrays_{};
};

}  // namespace trident::kernels::cpu::attention_tile
