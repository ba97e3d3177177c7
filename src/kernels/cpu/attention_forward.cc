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

// The causal (window, document) mask of S^T (cols keys, kBr queries from q0) of row b, key
// tile from k0: key c is seen by queries >= k0 + c (a no-op below the diagonal), and with a
// window or documents only by those <= last_query (Note [Document masks]).
// p0: the key position of the tile's first query (its index too, unless decoding: Note
// [Queries after cached keys]).
template <class Acc>
void mask_scores(Acc* pt, const AttentionShape& s, int64_t b, int64_t p0, int64_t k0, int64_t cols) {
  if (!s.causal) return;
  for (int64_t c = 0; c < cols; ++c)
    mask_outside(pt + c * kBr, kBr, k0 + c - p0, s.narrowed() ? s.last_query(b, k0 + c) - p0 + 1 : kBr);
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
    // A row that has seen no key yet (a window or document starting past this tile's keys) shifts by
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
  Acc* lse_rows = lse + (b * s.NH + h) * s.queries() + q0;
  for (int64_t r = 0; r < rows; ++r) {
    lse_rows[r] = m[r] + std::log(l[r]);
    const Acc inv_l = Acc(1) / l[r];
    T* o = out.row(b, h, q0 + r);
    for (int64_t d = 0; d < s.HS; ++d) o[d] = static_cast<T>(acc[r * HSp + d] * inv_l);
  }
}

// The key tiles the query tile of `rows` queries from key position p0 of row b visits: causal,
// up to the one holding its last query; with a window or documents, from the one holding its
// first query's first key.
inline int64_t first_key_tile(const AttentionShape& s, int64_t b, int64_t p0) { return s.first_key(b, p0) / kBc; }
inline int64_t key_tiles_end(const AttentionShape& s, int64_t p0, int64_t rows) {
  return s.causal ? (p0 + rows - 1) / kBc + 1 : ceil_div(s.T, kBc);
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
    const int64_t q0 = tile * kBr, rows = std::min(kBr, s.queries() - q0), p0 = s.query_position(b, q0);
    const Acc scale = static_cast<Acc>(s.scale);

    // Q^T, scaled: S^T comes out scaled (Note [Scale folded into q]).
    load_rows_transposed(qt, kBr, q.row(b, h, q0), q.time_stride, rows, HS, scale);
    std::fill(acc, acc + rows * HSp, Acc(0));
    std::fill(m, m + kBr, -std::numeric_limits<Acc>::infinity());
    std::fill(l, l + kBr, Acc(0));
    for (int64_t j = first_key_tile(s, b, p0); j < key_tiles_end(s, p0, rows); ++j) {
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
      // S^T (cols, kBr) = K (scale Q)^T; columns past `rows` are padding queries. A tile the
      // causal diagonal crosses computes only what its queries see (Note [Causal tiles trimmed]).
      const int64_t diag = p0 - k0;
      const bool crossed = s.causal && diag < cols - 1;
      if (crossed) causal_scores(pt, kBr, k_rows, ldk, qt, kBr, cols, kBr, HS, diag);
      else tile_matmul<false, false>(pt, kBr, k_rows, ldk, qt, kBr, cols, kBr, HS);
      mask_scores(pt, s, b, p0, k0, cols);
      online_softmax_step(pt, cols, m, l, alpha);
      if (crossed) causal_probabilities_times_values(pv, HSp, pt, kBr, v_rows, ldv, rows, HSp, cols, diag);
      else tile_matmul<true, false>(pv, HSp, pt, kBr, v_rows, ldv, rows, HSp, cols);
      rescale_and_add(acc, alpha, pv, rows, HSp);
    }
    store_output(out, lse, s, b, h, q0, rows, HSp, acc, m, l);
  }
};

#if TRIDENT_ATTENTION_BF16_DOT
// Note [bf16 forward]
// The forward with bf16 tile products (Note [bf16 tile products]) runs the same online softmax
// over the same tiles as ForwardTask, arranged so that the products are nearly all it does:
//  * K and V are packed once per call (pack_keys_and_values), not once per (query tile, key
//    tile) pair: K as pair rows, V in VNNI form, for every kv head. Under grouped-query
//    attention each kv head serves NH / NKV query heads, so the per-pair packing it replaces
//    was repeated T / kBr * NH / NKV times per key tile.
//  * The scale multiplies the scores inside the softmax's exponent (one FMA), and P^T is
//    rounded to key pairs as it is exponentiated (softmax_to_pairs): no pass over the tile
//    for either. (A scale <= 0, which the op allows, is applied before the mask instead:
//    -inf times it would not stay -inf.)
//  * P V sums straight into the output accumulator, rescaled by alpha as the product loads
//    it (Into::kRescale): no separate P V tile and no pass to add it.
// With the backward's same changes (Bf16Tiles::tile) and the shorter exponential (Note [exp
// for bf16 probabilities]), on one Zen 4 core (bench/attention_bench --NKV 4 --threads 1, LLaMA-
// 125M's B4 NH12 NKV4 T1024 HS64, process CPU time, 3 alternating runs each): forward 57 -> 42
// ms, backward 122 -> 107 ms. In a LLaMA-125M bf16 training step on 2 threads, attention went
// from 1205 to 1020 ms (train_step_bench --profile).

// K as pair rows (B * NKV, T, pairs(HS)) and V in VNNI form (B * NKV, pairs(T), HSp), packed
// once for every query tile that reads them. Key tile k0 (even) of kv head (b, g) starts at
// row k0 of the first and pair row k0 / 2 of the second.
struct PackedKeysAndValues {
  DataPtr block;
  const Pair* k;
  const Pair* v;
  int64_t P, HSp, T;
  const Pair* k_rows(int64_t b, int64_t g, int64_t NKV, int64_t k0) const { return k + ((b * NKV + g) * T + k0) * P; }
  const Pair* v_pairs(int64_t b, int64_t g, int64_t NKV, int64_t k0) const {
    return v + ((b * NKV + g) * pairs(T) + k0 / 2) * HSp;
  }
};

PackedKeysAndValues pack_keys_and_values(HeadsView<const bf16> k, HeadsView<const bf16> v,
                                         const AttentionShape& s, int64_t HSp) {
  const int64_t P = pairs(s.HS), heads = s.B * s.NKV;
  const int64_t k_words = s.T * P, v_words = pairs(s.T) * HSp;
  DataPtr block = host_allocator().allocate(static_cast<size_t>(heads * (k_words + v_words)) * sizeof(Pair),
                                            MemoryCategory::kActivation);
  Pair* kp = static_cast<Pair*>(block.get());
  Pair* vp = kp + heads * k_words;
  parallel_for(0, heads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bg = begin; bg < end; ++bg) {
      const int64_t b = bg / s.NKV, g = bg % s.NKV;
      // A tile (kBc rows, even) at a time: a paged view's rows are contiguous within a tile only.
      for (int64_t k0 = 0; k0 < s.T; k0 += kBc) {
        if (!k.holds(b, k0)) continue;  // before the row's window: never read
        const int64_t rows = std::min(kBc, s.T - k0);
        load_pair_rows(kp + bg * k_words + k0 * P, P, k.row(b, g, k0), k.time_stride, rows, s.HS);
        load_vnni(vp + bg * v_words + k0 / 2 * HSp, HSp, v.row(b, g, k0), v.time_stride, rows, s.HS);
      }
    }
  });
  return {std::move(block), kp, vp, P, HSp, s.T};
}

// One key tile's step of the online softmax (Note [Online softmax]) on the unscaled S^T
// (cols, kBr), lane-wise over the kBr queries: P^T = e^(scale S^T - m') goes straight into
// key pairs p_pairs (pairs(cols), kBr) for P V (the pair past an odd `cols` has a zero high
// half), and m, l and alpha are updated.
void softmax_to_pairs(Pair* p_pairs, const float* st, int64_t cols, float scale, float* m, float* l,
                      float* alpha) {
  using V = Vec<float>;
  const V minus_inf = splat(-std::numeric_limits<float>::infinity());
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int64_t r = 0; r < kBr; r += 16) {
    const V m_old = load(m + r);
    V m_new = m_old;
    for (int64_t c = 0; c < cols; ++c) {
      const V x = (V)_mm512_mul_ps(_mm512_loadu_ps(st + c * kBr + r), vscale);
      m_new = x > m_new ? x : m_new;
    }
    // A row that has seen no key yet shifts by 0 (see online_softmax_step).
    const __m512 minus_m = (__m512)(-(m_new == minus_inf ? V{} : m_new));
    auto p_at = [&](int64_t c) {
      return (V)exp_bf16_probabilities(_mm512_fmadd_ps(_mm512_loadu_ps(st + c * kBr + r), vscale, minus_m));
    };
    V sum{};
    for (int64_t c = 0; c < cols; c += 2) {
      const V p0 = p_at(c), p1 = c + 1 < cols ? p_at(c + 1) : V{};
      sum += p0;
      sum += p1;
      _mm512_storeu_si512(p_pairs + c / 2 * kBr + r, interleave_pairs((__m512)p0, (__m512)p1));
    }
    // m = -inf before the first tile: alpha = e^-inf = 0 (l and the accumulator are 0 then).
    const V a = (V)exp_bf16_probabilities((__m512)(m_old + (V)minus_m));
    store(alpha + r, a);
    store(l + r, a * load(l + r) + sum);
    store(m + r, m_new);
  }
}

struct ForwardTaskBf16 {
  HeadsView<bf16> out;
  float* lse;
  HeadsView<const bf16> q;
  const PackedKeysAndValues& kv;
  const AttentionShape& s;
  int64_t HSp;

  // Scratch (in floats; pair arrays are one float wide each): Q^T pairs (pairs(HS), kBr);
  // P^T pairs (kBc / 2, kBr); S^T (kBc, kBr); the output accumulator (kBr, HSp); m, l, alpha.
  using Buffers = TileBuffers<float, 7>;
  static std::array<int64_t, 7> scratch_sizes(int64_t HSp) {
    return {pairs(HSp) * kBr, kBc / 2 * kBr, kBc * kBr, kBr * HSp, kBr, kBr, kBr};
  }

  void run(int64_t b, int64_t h, int64_t tile, const Buffers& buf) const {
    Pair *qt = reinterpret_cast<Pair*>(buf[0]), *p_pairs = reinterpret_cast<Pair*>(buf[1]);
    float *st = buf[2], *acc = buf[3], *m = buf[4], *l = buf[5], *alpha = buf[6];
    const int64_t P = pairs(s.HS), g = h / (s.NH / s.NKV);
    const int64_t q0 = tile * kBr, rows = std::min(kBr, s.queries() - q0), p0 = s.query_position(b, q0);
    const float scale = static_cast<float>(s.scale);

    load_pair_columns(qt, kBr, q.row(b, h, q0), q.time_stride, rows, s.HS);
    std::fill(acc, acc + rows * HSp, 0.0f);
    std::fill(m, m + kBr, -std::numeric_limits<float>::infinity());
    std::fill(l, l + kBr, 0.0f);
    for (int64_t j = first_key_tile(s, b, p0); j < key_tiles_end(s, p0, rows); ++j) {
      const int64_t k0 = j * kBc, cols = std::min(kBc, s.T - k0);
      // S^T (cols, kBr) = K Q^T, unscaled; columns past `rows` are padding queries.
      tile_dot<false>(st, kBr, kv.k_rows(b, g, s.NKV, k0), P, qt, kBr, cols, kBr, P);
      if (!(scale > 0)) scale_scores(st, cols * kBr, scale);
      mask_scores(st, s, b, p0, k0, cols);
      softmax_to_pairs(p_pairs, st, cols, scale > 0 ? scale : 1.0f, m, l, alpha);
      tile_dot<true, Into::kRescale>(acc, HSp, p_pairs, kBr, kv.v_pairs(b, g, s.NKV, k0), HSp, rows, HSp,
                                     pairs(cols), alpha);
    }
    store_output(out, lse, s, b, h, q0, rows, HSp, acc, m, l);
  }
};
#endif

// Runs `Task` over every (b, h, query tile), tiles in balanced order (Note [Balancing causal
// tiles]).
template <class Task>
void run_forward_tasks(const Task& task, const AttentionShape& s, int64_t HSp) {
  const int64_t query_tiles = ceil_div(s.queries(), kBr);
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
  if constexpr (std::is_same_v<T, acc_t<T>>)
    if (s.Tq > 0 && s.Tq <= kDecodeQueries) return attention_decode_forward(out, lse, q, k, v, s);
  const int64_t HSp = round_up(s.HS, kColAlign);
#if TRIDENT_ATTENTION_BF16_DOT
  if constexpr (std::is_same_v<T, bf16>) {
    if (bf16_tile_products()) {
      const PackedKeysAndValues kv = pack_keys_and_values(k, v, s, HSp);
      return run_forward_tasks(ForwardTaskBf16{out, lse, q, kv, s, HSp}, s, HSp);
    }
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
