#include "kernels/cpu/gemv.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "core/dtype.h"
#include "core/parallel.h"

namespace trident::kernels::cpu {
namespace {

constexpr int64_t kLanes = 16;
// op(B) = B^T: rows of B per group (each read once per group of A's rows).
constexpr int64_t kRowsPerGroup = 4;
// op(B) = B^T: rows of A per register tile (3 x 4 accumulators). Measured on one Zen 5 core, 8
// rows of A against 512 rows of B (K = 768, B from L3): 35 GFMA/s in tiles of 4 rows, 54 in tiles
// of 2, 59 in tiles of 3 (3 + 3 + 2); the tile's shape does not change a sum's order.
constexpr int64_t kTileRows = 3;
// op(B) = B: the floats of partial sums a chunk of columns keeps in L1 for all of A's rows
// (24 KiB): the fewer the rows, the longer the run of each row of B read at once (6144
// columns, 24 KiB of a row, for one row of A; 768 for eight), which the hardware prefetchers
// stream far better than short pieces of many rows.
constexpr int64_t kPartialSums = 6144;
// op(B) = B: rows of B read together (four streams in flight), each term still added in k order.
constexpr int64_t kRowsTogether = 4;

inline float to_f32(float v) {
  return v;
}
inline float to_f32(bf16 v) {
  return static_cast<float>(v);
}

// The fixed tree over the 16 lanes (the same order as _mm512_reduce_add_ps's halving).
inline float reduce_lanes(const float* lanes) {
  float l8[8], l4[4];
  for (int i = 0; i < 8; ++i) l8[i] = lanes[i] + lanes[i + 8];
  for (int i = 0; i < 4; ++i) l4[i] = l8[i] + l8[i + 4];
  return (l4[0] + l4[2]) + (l4[1] + l4[3]);
}

#if defined(__AVX512F__)
inline __m512 load16(const float* p, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, p);
}
inline __m512 load16(const bf16* p, __mmask16 m) {
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  // The masked forms (all lanes): GCC 12 warns on the plain ones' undefined passthrough.
  const __m512i wide = _mm512_maskz_cvtepu16_epi32(0xFFFF, h);
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, wide, 16));
}
#endif

template <class T>
void store(T* c, float acc, float alpha, float beta) {
  const float v = beta == 0.0f ? alpha * acc : alpha * acc + beta * to_f32(*c);
  *c = T(v);
}

#if defined(__AVX512F__)
// Note [Prefetching the next rows]
// Why does dot_tile fetch the next group's rows of B itself? With more rows of A than one tile
// holds, a group of 4 rows of B (12 KiB at K = 768) is read from memory by the first tile of
// rows and from the cache by the others, so misses come in bursts with compute between them
// and the hardware prefetchers, which follow misses, do not run ahead across the gaps. The
// first tile prefetches the next group as it reads its own (one line per row per 16 k), so the
// group is in L1 when its turn comes. One Zen 5 core, 8 rows of A against LLaMA's LM head (32000
// x 768 from memory): 5-6 GB/s without, 9-12 GB/s with; at one row 21 -> 27-31 GB/s (noisy: a
// shared machine). Two or four groups ahead measured no better than one. Since Note [One row of B
// at a time], only several tiles of rows prefetch: with one tile (1 to 3 rows) B streams in order
// and the prefetches cost (Zen 4, one thread, LLaMA 125M's products: 30 GB/s without, 25 with).
//
// Note [One row of B at a time]
// A group's 4 rows of B used to be read side by side, one vector of each per step of k: four
// streams 4 K bytes apart. One Zen 4 thread read LLaMA 125M's products (x W^T, 400 MB) at 16-17
// GB/s that way and at 29-30 one row after another (a one-off program in turns), and
// llama.cpp's one-row dot product decoded its f32 LLaMA at 65 tok/s against trident's 53 on two
// threads (bench/results/2026-11-30-decode-panels-zen4). Each row's sum is the same 16 lanes over
// k ascending and the same tree, so the bits do not change (Note [Row-independent small
// products]).

// The sums of four vectors' lanes, each in reduce_lanes' tree, at once: lanes 0, 4, 8 and 12
// of the result.
inline __m512 reduce4(__m512 v0, __m512 v1, __m512 v2, __m512 v3) {
  // The masked forms (all lanes): GCC 12 warns on the plain ones' undefined passthrough.
  constexpr __mmask16 kAll = 0xFFFF;
  // lanes i + (i + 8): quarters (0 + 2, 1 + 3) of v0 and of v1, then of v2 and v3
  const __m512 s01 = _mm512_add_ps(_mm512_maskz_shuffle_f32x4(kAll, v0, v1, 0x44),
                                   _mm512_maskz_shuffle_f32x4(kAll, v0, v1, 0xEE));
  const __m512 s23 = _mm512_add_ps(_mm512_maskz_shuffle_f32x4(kAll, v2, v3, 0x44),
                                   _mm512_maskz_shuffle_f32x4(kAll, v2, v3, 0xEE));
  // + (i + 4): quarter 0 + quarter 1 of each pair: one quarter (4 lanes: l4) per vector
  const __m512 t = _mm512_add_ps(_mm512_maskz_shuffle_f32x4(kAll, s01, s23, 0x88),
                                 _mm512_maskz_shuffle_f32x4(kAll, s01, s23, 0xDD));
  // (l4[0] + l4[2]) + (l4[1] + l4[3]) in each quarter's first lane
  const __m512 u = _mm512_add_ps(t, _mm512_maskz_permute_ps(kAll, t, 0x4E));
  return _mm512_add_ps(u, _mm512_maskz_permute_ps(kAll, u, 0xB1));
}

// MS rows of A against 4 rows of B (b[0..3]): out[mi][r] = dot(A[mi], b[r]), B's rows one after
// another (Note [One row of B at a time]). `next`, when not null: the rows of B the following tile
// reads, fetched into the cache meanwhile (Note [Prefetching the next rows]).
template <int MS, class T>
void dot_tile(const float* A, int64_t lda, const T* const* b, int64_t K, float out[][kRowsPerGroup],
              const T* const* next) {
  __m512 acc[MS][kRowsPerGroup];
  for (int r = 0; r < kRowsPerGroup; ++r) {
    for (int mi = 0; mi < MS; ++mi) acc[mi][r] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k += kLanes) {
      const __mmask16 mask = K - k >= kLanes ? __mmask16(0xFFFF) : __mmask16((1u << (K - k)) - 1);
      if (next != nullptr) _mm_prefetch(reinterpret_cast<const char*>(next[r] + k), _MM_HINT_T0);
      const __m512 w = load16(b[r] + k, mask);
      for (int mi = 0; mi < MS; ++mi)
        acc[mi][r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, A + mi * lda + k), w, acc[mi][r]);
    }
  }
  for (int mi = 0; mi < MS; ++mi) {
    alignas(64) float lanes[kLanes];
    _mm512_store_ps(lanes, reduce4(acc[mi][0], acc[mi][1], acc[mi][2], acc[mi][3]));
    for (int r = 0; r < kRowsPerGroup; ++r) out[mi][r] = lanes[4 * r];
  }
}
// Note [One pass over B for five to eight rows]
// With more rows of A than a 3 x 4 tile holds, dot_tile reads each group of B's rows from memory
// in its first tile of rows and from the cache in the others, so the memory idles through the
// second and third passes. When A's rows fit in L1 beside B's (M K floats <= 32 KiB: K <= 1024
// at 8 rows), dot_tile_wide takes all of them against 2 rows of B in one pass instead (16
// accumulators), and B streams without a pause. Each sum keeps its order (16 lanes over k
// ascending, then reduce_lanes' tree), so the bits are dot_tile's. bench/gemv_bench, 8 rows,
// op(B) = B^T, 2 threads, Zen 5, three runs in turns: 22.0-23.2 GB/s on average over LLaMA
// 125M's q, k, gate and LM head products, then 25.6-28.2; K = 2048 (A's 64 KiB from L2) ran
// slower, so it keeps the tiles.
constexpr int64_t kWideTileFloats = 8192;

// All MS (5 to 8) rows of A against 2 rows of B (Note [One pass over B for five to eight rows]).
template <int MS, class T>
void dot_tile_wide(const float* A, int64_t lda, const T* const* b, int64_t K, float out[][2], const T* const* next) {
  __m512 acc[MS][2];
  for (int mi = 0; mi < MS; ++mi) acc[mi][0] = acc[mi][1] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += kLanes) {
    const __mmask16 mask = K - k >= kLanes ? __mmask16(0xFFFF) : __mmask16((1u << (K - k)) - 1);
    _mm_prefetch(reinterpret_cast<const char*>(next[0] + k), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(next[1] + k), _MM_HINT_T0);
    const __m512 w0 = load16(b[0] + k, mask), w1 = load16(b[1] + k, mask);
    for (int mi = 0; mi < MS; ++mi) {
      const __m512 a = _mm512_maskz_loadu_ps(mask, A + mi * lda + k);
      acc[mi][0] = _mm512_fmadd_ps(a, w0, acc[mi][0]);
      acc[mi][1] = _mm512_fmadd_ps(a, w1, acc[mi][1]);
    }
  }
  for (int mi = 0; mi < MS; mi += 2) {
    alignas(64) float lanes[kLanes];
    const int m2 = mi + 1 < MS ? mi + 1 : mi;
    _mm512_store_ps(lanes, reduce4(acc[mi][0], acc[mi][1], acc[m2][0], acc[m2][1]));
    out[mi][0] = lanes[0];
    out[mi][1] = lanes[4];
    out[m2][0] = lanes[8];
    out[m2][1] = lanes[12];
  }
}

template <class T>
void dot_rows_wide(int64_t M, int64_t n_begin, int64_t n_end, int64_t K, float alpha, const float* A, int64_t lda,
                   const T* B, int64_t ldb, float beta, T* C, int64_t ldc) {
  for (int64_t n0 = n_begin; n0 < n_end; n0 += 2) {
    const int64_t rows = std::min<int64_t>(2, n_end - n0);
    const T* b[2] = {B + n0 * ldb, B + (n0 + (rows > 1 ? 1 : 0)) * ldb};
    const T* next[2] = {B + std::min(n0 + 2, n_end - 1) * ldb, B + std::min(n0 + 3, n_end - 1) * ldb};
    float out[8][2];
    switch (M) {
      case 5: dot_tile_wide<5>(A, lda, b, K, out, next); break;
      case 6: dot_tile_wide<6>(A, lda, b, K, out, next); break;
      case 7: dot_tile_wide<7>(A, lda, b, K, out, next); break;
      default: dot_tile_wide<8>(A, lda, b, K, out, next); break;
    }
    for (int64_t m = 0; m < M; ++m)
      for (int64_t r = 0; r < rows; ++r) store(C + m * ldc + n0 + r, out[m][r], alpha, beta);
  }
}
#else
template <int MS, class T>
void dot_tile(const float* A, int64_t lda, const T* const* b, int64_t K, float out[][kRowsPerGroup],
              const T* const* /*next*/) {
  float acc[MS][kRowsPerGroup][kLanes] = {};
  for (int64_t k0 = 0; k0 < K; k0 += kLanes) {
    const int64_t len = std::min(kLanes, K - k0);
    for (int mi = 0; mi < MS; ++mi)
      for (int r = 0; r < kRowsPerGroup; ++r)
        for (int64_t l = 0; l < len; ++l)
          acc[mi][r][l] = std::fma(A[mi * lda + k0 + l], to_f32(b[r][k0 + l]), acc[mi][r][l]);
  }
  for (int mi = 0; mi < MS; ++mi)
    for (int r = 0; r < kRowsPerGroup; ++r) out[mi][r] = reduce_lanes(acc[mi][r]);
}
#endif

// op(B) = B^T, B (N,K): output n of row m is dot(A[m], B[n]). A is f32 here (widened). Rows of
// B four at a time (a last group of fewer repeats its first row and stores only its own).
template <class T>
void dot_rows(int64_t M, int64_t n_begin, int64_t n_end, int64_t K, float alpha, const float* A,
              int64_t lda, const T* B, int64_t ldb, float beta, T* C, int64_t ldc) {
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kRowsPerGroup) {
    const int64_t rows = std::min(kRowsPerGroup, n_end - n0);
    const T* b[kRowsPerGroup];
    const T* next[kRowsPerGroup];
    for (int64_t r = 0; r < kRowsPerGroup; ++r) {
      b[r] = B + (n0 + (r < rows ? r : 0)) * ldb;
      next[r] = B + std::min(n0 + kRowsPerGroup + r, n_end - 1) *
                        ldb;  // the last group: its own last row
    }
    for (int64_t m0 = 0; m0 < M; m0 += kTileRows) {
      float out[kTileRows][kRowsPerGroup];
      const float* a = A + m0 * lda;
      const int64_t ms = std::min<int64_t>(kTileRows, M - m0);
      // Only the first of several tiles of rows prefetches: the others read B from the cache. A
      // lone tile streams B in order, which the hardware prefetchers follow (Note [One row of B
      // at a time]).
      const T* const* fetch = m0 == 0 && M > kTileRows ? next : nullptr;
      switch (ms) {
        case 1:
          dot_tile<1>(a, lda, b, K, out, fetch);
          break;
        case 2:
          dot_tile<2>(a, lda, b, K, out, fetch);
          break;
        default:
          dot_tile<3>(a, lda, b, K, out, fetch);
          break;
      }
      for (int64_t mi = 0; mi < ms; ++mi)
        for (int64_t r = 0; r < rows; ++r)
          store(C + (m0 + mi) * ldc + n0 + r, out[mi][r], alpha, beta);
    }
  }
}

// y[c] += a[0] b[0][c], then + a[1] b[1][c], ... for the R rows b[r] (c in [0, len)): R terms
// of the product per pass over y, added in k order.
template <int R, class T>
inline void axpy(float* y, const float* a, const T* const* b, int64_t len) {
#if defined(__AVX512F__)
  __m512 av[R];
  for (int r = 0; r < R; ++r) av[r] = _mm512_set1_ps(a[r]);
  for (int64_t c = 0; c < len; c += kLanes) {
    const __mmask16 mask = len - c >= kLanes ? __mmask16(0xFFFF) : __mmask16((1u << (len - c)) - 1);
    __m512 acc = _mm512_maskz_loadu_ps(mask, y + c);
    for (int r = 0; r < R; ++r) acc = _mm512_fmadd_ps(av[r], load16(b[r] + c, mask), acc);
    _mm512_mask_storeu_ps(y + c, mask, acc);
  }
#else
  for (int64_t c = 0; c < len; ++c) {
    float acc = y[c];
    for (int r = 0; r < R; ++r) acc = std::fma(a[r], to_f32(b[r][c]), acc);
    y[c] = acc;
  }
#endif
}

// op(B) = B, B (K,N): row m's outputs [n_begin, n_end) accumulate A[m][k] * B[k] over k
// ascending, a chunk of columns at a time; B's rows are read once per chunk for all of A's rows.
template <class T>
void axpy_rows(int64_t M, int64_t n_begin, int64_t n_end, int64_t K, float alpha, const float* A,
               int64_t lda, const T* B, int64_t ldb, float beta, T* C, int64_t ldc) {
  alignas(64) float y[kPartialSums];
  const int64_t chunk = kPartialSums / M / kLanes * kLanes;
  for (int64_t c0 = n_begin; c0 < n_end; c0 += chunk) {
    const int64_t len = std::min(chunk, n_end - c0);
    std::fill(y, y + M * chunk, 0.0f);
    int64_t k = 0;
    for (; k + kRowsTogether <= K; k += kRowsTogether) {
      const T* rows[kRowsTogether];
      for (int64_t r = 0; r < kRowsTogether; ++r) rows[r] = B + (k + r) * ldb + c0;
      for (int64_t m = 0; m < M; ++m) {
        float a[kRowsTogether];
        for (int64_t r = 0; r < kRowsTogether; ++r) a[r] = A[m * lda + k + r];
        axpy<kRowsTogether>(y + m * chunk, a, rows, len);
      }
    }
    for (; k < K; ++k) {
      const T* row = B + k * ldb + c0;
      for (int64_t m = 0; m < M; ++m) axpy<1>(y + m * chunk, A + m * lda + k, &row, len);
    }
    for (int64_t m = 0; m < M; ++m)
      for (int64_t c = 0; c < len; ++c) store(C + m * ldc + c0 + c, y[m * chunk + c], alpha, beta);
  }
}

#if defined(__AVX512F__)
// Note [Rows in registers]
// Why does op(B) = B take another loop (on AVX-512, for any number of rows of A)? axpy_rows keeps
// every row's partial sums in L1 and passes over them once per row of A for each few rows of B: at
// 8 rows that is 8 loads and stores of partial sums per vector of B (each also re-read from L1 7
// times), and a chunk of only 768 columns, so B is read in 3 KiB pieces of rows a row stride apart,
// which the prefetchers follow poorly. On 2 Emerald Rapids cores it read B at ~9 GB/s at 8 rows
// against 17-24 at one. Here the partial sums of all M rows for a strip of kStripVecs vectors of
// columns live in registers (8 x 3 = 24 accumulators) over kBlockK rows of B: per row of B, 3
// vector loads and 3 M FMAs, with the sums spilled to a panel (M x up to kPanelFloats / M columns,
// in L2) once per kBlockK rows. Each term is still one FMA in k order from zero, so the bits are
// axpy_rows' (Note [Row-independent small products]). At one row too: on 2 Zen 5 cores axpy_rows
// read GPT-2's Conv1D weights at 18-28 GB/s, this loop at 35-45 (gemv_bench, memory ~45).
// A strip reads 3 lines from each of kBlockK rows a row stride apart, then computes; from two
// rows of A on, the compute between one strip's lines and the next's leaves the prefetchers,
// which follow misses, behind. So each row also prefetches its lines kPrefetchStrips strips
// ahead. gemv_bench on 2 Zen 5 cores, GPT-2's four Conv1D shapes, two runs in turns (GB/s on
// average): 2 rows 32.4-32.7 -> 37.5-38.6, 4 rows 25.7-25.8 -> 31.9-34.8, 6 rows 22.6-23.1 ->
// 34.8-35.4, 8 rows 21.0-22.6 -> 29.6-30.3 (three runs); one row unchanged. 4 strips ahead
// measured no better than 2, and 8 worse.
constexpr int64_t kRowsInRegisters = 1;  // the fewest rows of A that take this loop
constexpr int64_t kStripVecs = 3;
constexpr int64_t kPrefetchStrips = 2;
constexpr int64_t kBlockK = 16;
constexpr int64_t kPanelFloats = 16384;  // 64 KiB of partial sums

// y (M, V vectors) at row stride ldy += A (M, kn) B (kn, V vectors), rows [k0, k0 + kn) of B;
// `first`: y starts at zero. The last vector's lanes are `last`.
template <int M, int V, class T>
inline void strip_rows(float* y, int64_t ldy, const float* A, int64_t lda, const T* B, int64_t ldb,
                       int64_t k0, int64_t kn, bool first, __mmask16 last) {
  __m512 acc[M][V];
  for (int m = 0; m < M; ++m)
    for (int v = 0; v < V; ++v)
      acc[m][v] = first
                      ? _mm512_setzero_ps()
                      : _mm512_maskz_loadu_ps(v == V - 1 ? last : 0xFFFF, y + m * ldy + v * kLanes);
  for (int64_t k = k0; k < k0 + kn; ++k) {
    if (M > 1)  // the strip kPrefetchStrips ahead in this row (Note [Rows in registers])
      for (int v = 0; v < V; ++v)
        _mm_prefetch(reinterpret_cast<const char*>(B + k * ldb + (kPrefetchStrips * kStripVecs + v) * kLanes),
                     _MM_HINT_T0);
    __m512 b[V];
    for (int v = 0; v < V; ++v)
      b[v] = load16(B + k * ldb + v * kLanes, v == V - 1 ? last : __mmask16(0xFFFF));
    for (int m = 0; m < M; ++m) {
      const __m512 a = _mm512_set1_ps(A[m * lda + k]);
      for (int v = 0; v < V; ++v) acc[m][v] = _mm512_fmadd_ps(a, b[v], acc[m][v]);
    }
  }
  for (int m = 0; m < M; ++m)
    for (int v = 0; v < V; ++v)
      _mm512_mask_storeu_ps(y + m * ldy + v * kLanes, v == V - 1 ? last : 0xFFFF, acc[m][v]);
}

// axpy_rows' product for M (1..kGemvMaxRows) rows (Note [Rows in registers]).
template <int M, class T>
void strips(int64_t n_begin, int64_t n_end, int64_t K, float alpha, const float* A, int64_t lda,
            const T* B, int64_t ldb, float beta, T* C, int64_t ldc) {
  alignas(64) float y[kPanelFloats];
  const int64_t strip = kStripVecs * kLanes, panel = kPanelFloats / M / strip * strip;
  for (int64_t p0 = n_begin; p0 < n_end; p0 += panel) {
    const int64_t width = std::min(panel, n_end - p0);
    for (int64_t k0 = 0; k0 < K; k0 += kBlockK) {
      const int64_t kn = std::min(kBlockK, K - k0);
      const T* b = B + p0;
      int64_t c = 0;
      for (; c + strip <= width; c += strip)
        strip_rows<M, kStripVecs>(y + c, panel, A, lda, b + c, ldb, k0, kn, k0 == 0, 0xFFFF);
      if (c < width) {
        const int64_t rest = width - c, vecs = (rest + kLanes - 1) / kLanes,
                      tail = rest - (vecs - 1) * kLanes;
        const __mmask16 last = tail == kLanes ? __mmask16(0xFFFF) : __mmask16((1u << tail) - 1);
        if (vecs == 1)
          strip_rows<M, 1>(y + c, panel, A, lda, b + c, ldb, k0, kn, k0 == 0, last);
        else if (vecs == 2)
          strip_rows<M, 2>(y + c, panel, A, lda, b + c, ldb, k0, kn, k0 == 0, last);
        else
          strip_rows<M, 3>(y + c, panel, A, lda, b + c, ldb, k0, kn, k0 == 0, last);
      }
    }
    for (int64_t m = 0; m < M; ++m)
      for (int64_t c = 0; c < width; ++c)
        store(C + m * ldc + p0 + c, y[m * panel + c], alpha, beta);
  }
}

template <class T, int... Ms>
void strips_rows_of(int64_t M, int64_t n_begin, int64_t n_end, int64_t K, float alpha, const float* A, int64_t lda,
                    const T* B, int64_t ldb, float beta, T* C, int64_t ldc, std::integer_sequence<int, Ms...>) {
  using Fn = void (*)(int64_t, int64_t, int64_t, float, const float*, int64_t, const T*, int64_t, float, T*, int64_t);
  static constexpr Fn by_rows[] = {&strips<Ms + 1, T>...};
  by_rows[M - 1](n_begin, n_end, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// strips<M> for M in 1..kGemvMaxRows.
template <class T>
void strips_rows(int64_t M, int64_t n_begin, int64_t n_end, int64_t K, float alpha, const float* A,
                 int64_t lda, const T* B, int64_t ldb, float beta, T* C, int64_t ldc) {
  strips_rows_of<T>(M, n_begin, n_end, K, alpha, A, lda, B, ldb, beta, C, ldc,
                    std::make_integer_sequence<int, kGemvMaxRows>());
}
#endif

}  // namespace

template <class T>
void gemv(bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, float beta, T* C, int64_t ldc, bool serial) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, bf16>, "gemv: float or bf16");
  if (M == 0 || N == 0) return;
  // A is small (M x K); bf16 rows are widened once rather than in every column group.
  std::vector<float> widened;
  const float* a = nullptr;
  int64_t a_ld = lda;
  if constexpr (std::is_same_v<T, float>) {
    a = A;
  } else {
    widened.resize(static_cast<size_t>(M * K));
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k)
        widened[static_cast<size_t>(m * K + k)] = static_cast<float>(A[m * lda + k]);
    a = widened.data();
    a_ld = K;
  }
  auto columns = [&](int64_t nb, int64_t ne) {
#if defined(__AVX512F__)
    if (trans_b && M > 4 && M * K <= kWideTileFloats)
      return dot_rows_wide(M, nb, ne, K, alpha, a, a_ld, B, ldb, beta, C, ldc);
#endif
    if (trans_b) return dot_rows(M, nb, ne, K, alpha, a, a_ld, B, ldb, beta, C, ldc);
#if defined(__AVX512F__)
    if (M >= kRowsInRegisters)
      return strips_rows(M, nb, ne, K, alpha, a, a_ld, B, ldb, beta, C, ldc);
#endif
    axpy_rows(M, nb, ne, K, alpha, a, a_ld, B, ldb, beta, C, ldc);
  };
  // Threads take whole groups of columns: about 64 KiB of B each at least, so a small product
  // stays on one thread.
  const int64_t group = trans_b ? kRowsPerGroup : kLanes;
  const int64_t grain = std::max<int64_t>(
      group, (65536 / std::max<int64_t>(K * static_cast<int64_t>(sizeof(T)), 1) + group - 1) /
                 group * group);
  if (serial) return columns(0, N);
  parallel_for(0, N, grain, columns);
}

template void gemv<float>(bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t, bool);
template void gemv<bf16>(bool, int64_t, int64_t, int64_t, float, const bf16*, int64_t, const bf16*,
                         int64_t, float, bf16*, int64_t, bool);

}  // namespace trident::kernels::cpu
