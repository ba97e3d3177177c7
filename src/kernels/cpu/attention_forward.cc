// The forward of the tiled attention (contract in attention.h): one task per (batch, query
// head, query tile of kBr rows), which streams the key tiles it can see past its queries
// with an online softmax and writes its output rows and their logsumexp. No task reads
// another's results, so tasks run in any order on any thread with the same bits.
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/parallel.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_bf16_tile.h"
#include "kernels/cpu/attention_tile.h"

namespace trident::kernels::cpu {
namespace {
using namespace attention_tile;

// Note [Online softmax]
// A query's scores arrive one key tile at a time. We keep the running max m of the scores
// seen so far, the running sum l = sum e^(s - m) and the unnormalized output
// acc = sum e^(s - m) v. A tile that raises the max to m' rescales the old terms by
// alpha = e^(m - m'):  l = alpha l + sum_tile e^(s - m'),  acc = alpha acc + P_tile V_tile.
// After the last tile, out = acc / l, and the logsumexp m + log l is cached: the backward
// recomputes P = e^(s - lse) from it with no max or sum of its own.
// Under the causal mask, tiles entirely above the diagonal are never visited, and only the
// diagonal tile (and a partial last tile) is masked element by element; with a sliding
// window, neither are the tiles wholly before the window (Note [Sliding window]).

// Note [Transposed scores in the forward]
// The forward computes S^T = K Q^T (keys down, queries across) rather than S = Q K^T:
//  * K and V are then read as stored, row by row: for f32 and f64 the tile products use the
//    input tensors in place (any time stride), so nothing is copied per (query, key) tile
//    pair; only Q^T is built, once per query tile. S = Q K^T would need K^T per pair.
//  * the softmax statistics of the kBr queries are vectors across a row of S^T, so the
//    running max, sum and rescaling are lane-wise vector operations with no horizontal
//    reductions.
//  * P V = (P^T)^T V is tile_matmul's transposed-A form, which runs as fast as the plain one.
// Measured on one Zen 3 core (B=1, NH=4, T=1024, HS=64, f32, CPU time, best of 7): 54 useful
// GFLOP/s with S = Q K^T and row-wise statistics, 59 with S^T.
// (The backward keeps S = Q K^T: its key-side tiles are loaded once per key tile and reused
// over every query tile, so the transposes there are already amortized.)

// The causal (and window) mask of S^T (cols keys, kBr queries from q0), key tile from k0:
// key c is seen by queries >= k0 + c (a no-op below the diagonal), and with a window only by
// those < k0 + c + window.
template <class Acc>
void mask_scores(Acc* pt, const AttentionShape& s, int64_t q0, int64_t k0, int64_t cols) {
  if (!s.causal) return;
  for (int64_t c = 0; c < cols; ++c)
    mask_outside(pt + c * kBr, kBr, k0 + c - q0, s.window > 0 ? k0 + c - q0 + s.window : kBr);
}

// One key tile's step of the online softmax (Note [Online softmax]), lane-wise over the kBr
// queries: S^T (cols, kBr) becomes P^T = e^(S^T - m'), and m, l and alpha are updated.
template <class Acc>
void online_softmax_step(Acc* pt, int64_t cols, Acc* m, Acc* l, Acc* alpha) {
  using V = Vec<Acc>;
  constexpr int kLanes = Simd<Acc>::kLanes;
  const V minus_inf = splat(-std::numeric_limits<Acc>::infinity());
  for (int64_t r = 0; r < kBr; r += kLanes) {
    V m_new = load(m + r);
    for (int64_t c = 0; c < cols; ++c) {
      const V x = load(pt + c * kBr + r);
      m_new = x > m_new ? x : m_new;
    }
    // A row that has seen no key yet (a window starting past this tile's keys) shifts by
    // 0: e^(-inf - 0) = 0, where -inf - -inf would be NaN. Finite maxima are unchanged.
    const V m_use = m_new == minus_inf ? V{} : m_new;
    V sum{};
    for (int64_t c = 0; c < cols; ++c) {
      const V p = exp_lanes<Acc>(load(pt + c * kBr + r) - m_use);
      store(pt + c * kBr + r, p);
      sum += p;
    }
    // m = -inf before the first tile: alpha = e^-inf = 0 (l and acc are 0 then).
    const V a = exp_lanes<Acc>(load(m + r) - m_use);
    store(alpha + r, a);
    store(l + r, a * load(l + r) + sum);
    store(m + r, m_new);
  }
}

// acc (rows, HSp) = alpha acc + pv (Note [Blocked accumulation]).
template <class Acc>
void rescale_and_add(Acc* acc, const Acc* alpha, const Acc* pv, int64_t rows, int64_t HSp) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = 0; d < HSp; ++d) acc[r * HSp + d] = alpha[r] * acc[r * HSp + d] + pv[r * HSp + d];
}

// The query tile's output rows acc / l and their logsumexp m + log l.
template <class T, class Acc>
void store_output(HeadsView<T> out, Acc* lse, const AttentionShape& s, int64_t b, int64_t h,
                  int64_t q0, int64_t rows, int64_t HSp, const Acc* acc, const Acc* m, const Acc* l) {
  Acc* lse_rows = lse + (b * s.NH + h) * s.T + q0;
  for (int64_t r = 0; r < rows; ++r) {
    lse_rows[r] = m[r] + std::log(l[r]);
    const Acc inv_l = Acc(1) / l[r];
    T* o = out.row(b, h, q0 + r);
    for (int64_t d = 0; d < s.HS; ++d) o[d] = static_cast<T>(acc[r * HSp + d] * inv_l);
  }
}

// The key tiles query tile [q0, q0 + rows) visits: causal, up to the one holding its last
// query; with a window, from the one holding its first query's first key.
inline int64_t first_key_tile(const AttentionShape& s, int64_t q0) { return s.first_key(q0) / kBc; }
inline int64_t key_tiles_end(const AttentionShape& s, int64_t q0, int64_t rows) {
  return s.causal ? (q0 + rows - 1) / kBc + 1 : ceil_div(s.T, kBc);
}

template <class T, class Acc = acc_t<T>>
struct ForwardTask {
  HeadsView<T> out;
  Acc* lse;
  HeadsView<const T> q, k, v;
  const AttentionShape& s;
  int64_t HSp;

  // Scratch: q^T (HSp, kBr); k, v tiles (kBc, HSp) when they cannot be read in place;
  // S^T, then P^T (kBc, kBr); output accumulator and one tile's P V (kBr, HSp); running max,
  // sum and rescaling factor of every query (kBr).
  using Buffers = TileBuffers<Acc, 9>;
  static std::array<int64_t, 9> scratch_sizes(int64_t HSp) {
    return {HSp * kBr, kBc * HSp, kBc * HSp, kBc * kBr, kBr * HSp, kBr * HSp, kBr, kBr, kBr};
  }

  // Query tile `tile` of head h of batch b.
  void run(int64_t b, int64_t h, int64_t tile, const Buffers& buf) const {
    Acc *qt = buf[0], *k_buf = buf[1], *v_buf = buf[2], *pt = buf[3];
    Acc *acc = buf[4], *pv = buf[5], *m = buf[6], *l = buf[7], *alpha = buf[8];
    const int64_t HS = s.HS, g = h / (s.NH / s.NKV);
    const int64_t q0 = tile * kBr, rows = std::min(kBr, s.T - q0);
    const Acc scale = static_cast<Acc>(s.scale);

    // Q^T, scaled: S^T comes out scaled (Note [Scale folded into q]).
    load_rows_transposed(qt, kBr, q.row(b, h, q0), q.time_stride, rows, HS, scale);
    std::fill(acc, acc + rows * HSp, Acc(0));
    std::fill(m, m + kBr, -std::numeric_limits<Acc>::infinity());
    std::fill(l, l + kBr, Acc(0));
    for (int64_t j = first_key_tile(s, q0); j < key_tiles_end(s, q0, rows); ++j) {
      const int64_t k0 = j * kBc, cols = std::min(kBc, s.T - k0);
      // K and V rows are tile_matmul operands in place when they are already Acc (and, for
      // V, whose columns are the product's columns, when HS needs no padding).
      const Acc* k_rows = k_buf;
      const Acc* v_rows = v_buf;
      int64_t ldk = HSp, ldv = HSp;
      if constexpr (std::is_same_v<T, Acc>) {
        k_rows = k.row(b, g, k0);
        ldk = k.time_stride;
        if (HSp == HS) {
          v_rows = v.row(b, g, k0);
          ldv = v.time_stride;
        }
      }
      if (k_rows == k_buf) load_rows(k_buf, HSp, k.row(b, g, k0), k.time_stride, cols, HS);
      if (v_rows == v_buf) load_rows(v_buf, HSp, v.row(b, g, k0), v.time_stride, cols, HS);
      // S^T (cols, kBr) = K (scale Q)^T; columns past `rows` are padding queries.
      tile_matmul<false, false>(pt, kBr, k_rows, ldk, qt, kBr, cols, kBr, HS);
      mask_scores(pt, s, q0, k0, cols);
      online_softmax_step(pt, cols, m, l, alpha);
      tile_matmul<true, false>(pv, HSp, pt, kBr, v_rows, ldv, rows, HSp, cols);
      rescale_and_add(acc, alpha, pv, rows, HSp);
    }
    store_output(out, lse, s, b, h, q0, rows, HSp, acc, m, l);
  }
};

#if TRIDENT_ATTENTION_BF16_DOT
// The forward with bf16 tile products (Note [bf16 tile products]): the same online softmax
// over the same tiles, with S^T = K Q^T and P V computed by vdpbf16ps and the scale applied
// to the f32 scores.
struct ForwardTaskBf16 {
  HeadsView<bf16> out;
  float* lse;
  HeadsView<const bf16> q, k, v;
  const AttentionShape& s;
  int64_t HSp;

  // Scratch (in floats; pair arrays are one float wide each): Q^T pairs (pairs(HS), kBr);
  // k pairs (kBc, pairs(HS)); v in VNNI form (kBc / 2, HSp); P^T pairs (kBc / 2, kBr);
  // S^T, then P^T (kBc, kBr); output accumulator and one tile's P V (kBr, HSp); m, l, alpha.
  using Buffers = TileBuffers<float, 10>;
  static std::array<int64_t, 10> scratch_sizes(int64_t HSp) {
    const int64_t P = pairs(HSp);
    return {P * kBr, kBc * P, kBc / 2 * HSp, kBc / 2 * kBr, kBc * kBr, kBr * HSp, kBr * HSp, kBr, kBr, kBr};
  }

  void run(int64_t b, int64_t h, int64_t tile, const Buffers& buf) const {
    Pair *qt = reinterpret_cast<Pair*>(buf[0]), *k_pairs = reinterpret_cast<Pair*>(buf[1]);
    Pair *v_vnni = reinterpret_cast<Pair*>(buf[2]), *p_pairs = reinterpret_cast<Pair*>(buf[3]);
    float *pt = buf[4], *acc = buf[5], *pv = buf[6], *m = buf[7], *l = buf[8], *alpha = buf[9];
    const int64_t HS = s.HS, P = pairs(HS), g = h / (s.NH / s.NKV);
    const int64_t q0 = tile * kBr, rows = std::min(kBr, s.T - q0);
    const float scale = static_cast<float>(s.scale);

    load_pair_columns(qt, kBr, q.row(b, h, q0), q.time_stride, rows, HS);
    std::fill(acc, acc + rows * HSp, 0.0f);
    std::fill(m, m + kBr, -std::numeric_limits<float>::infinity());
    std::fill(l, l + kBr, 0.0f);
    for (int64_t j = first_key_tile(s, q0); j < key_tiles_end(s, q0, rows); ++j) {
      const int64_t k0 = j * kBc, cols = std::min(kBc, s.T - k0);
      load_pair_rows(k_pairs, P, k.row(b, g, k0), k.time_stride, cols, HS);
      load_vnni(v_vnni, HSp, v.row(b, g, k0), v.time_stride, cols, HS);
      // S^T (cols, kBr) = K Q^T, then scaled in f32.
      tile_dot<false>(pt, kBr, k_pairs, P, qt, kBr, cols, kBr, P);
      for (int64_t i = 0; i < cols * kBr; i += 16)
        _mm512_storeu_ps(pt + i, _mm512_mul_ps(_mm512_loadu_ps(pt + i), _mm512_set1_ps(scale)));
      mask_scores(pt, s, q0, k0, cols);
      online_softmax_step(pt, cols, m, l, alpha);
      round_row_pairs(p_pairs, kBr, pt, kBr, cols, kBr);
      tile_dot<true>(pv, HSp, p_pairs, kBr, v_vnni, HSp, rows, HSp, pairs(cols));
      rescale_and_add(acc, alpha, pv, rows, HSp);
    }
    store_output(out, lse, s, b, h, q0, rows, HSp, acc, m, l);
  }
};
#endif

// Runs `Task` over every (b, h, query tile), tiles in balanced order (Note [Balancing causal
// tiles]).
template <class Task>
void run_forward_tasks(const Task& task, const AttentionShape& s, int64_t HSp) {
  const int64_t query_tiles = ceil_div(s.T, kBr);
  parallel_for(0, s.B * s.NH * query_tiles, 1, [&](int64_t begin, int64_t end) {
    const typename Task::Buffers buf(Task::scratch_sizes(HSp));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t bh = t / query_tiles, u = t % query_tiles;
      const int64_t tile = s.causal ? balanced_tile(u, query_tiles) : u;
      task.run(bh / s.NH, bh % s.NH, tile, buf);
    }
  });
}

}  // namespace

template <class T>
void attention_forward(HeadsView<T> out, acc_t<T>* lse, HeadsView<const T> q,
                       HeadsView<const T> k, HeadsView<const T> v, const AttentionShape& s) {
  const int64_t HSp = round_up(s.HS, kColAlign);
#if TRIDENT_ATTENTION_BF16_DOT
  if constexpr (std::is_same_v<T, bf16>) {
    if (bf16_tile_products()) return run_forward_tasks(ForwardTaskBf16{out, lse, q, k, v, s, HSp}, s, HSp);
  }
#endif
  run_forward_tasks(ForwardTask<T>{out, lse, q, k, v, s, HSp}, s, HSp);
}

#define TRI_INSTANTIATE(T)                                                                    \
  template void attention_forward<T>(HeadsView<T>, acc_t<T>*, HeadsView<const T>,             \
                                     HeadsView<const T>, HeadsView<const T>, const AttentionShape&);
TRI_FOR_EACH_FLOATING_TYPE(TRI_INSTANTIATE)
#undef TRI_INSTANTIATE

}  // namespace trident::kernels::cpu
