// The backward of the tiled attention (contract in attention.h), FlashAttention-2 style:
// every score tile is recomputed from q, k and the forward's logsumexp, and dq, dk, dv are
// accumulated tile by tile in acc_t<T> without ever holding a (T, T) matrix. Two schedules
// share one tile routine and give the same bits (Note [Backward schedules]).
#include <algorithm>
#include <type_traits>

#include "core/parallel.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_bf16_tile.h"
#include "kernels/cpu/attention_tile.h"

namespace trident::kernels::cpu {
namespace {
using namespace attention_tile;

// Positions and sizes of one (query tile, key tile) pair, and the softmax statistics of its
// query rows.
template <class Acc>
struct TilePair {
  const Acc* lse;    // (rows) logsumexp of the score rows, from the forward
  const Acc* delta;  // (rows) rowsum(dout * out)
  int64_t b;                   // the batch row
  int64_t q0, rows, k0, cols;  // first query / key position and sizes of the two tiles
};

// p (rows, kBc) = S becomes P, zero where masked: each row's visible keys go through
// exp_row(row, lse of the row); by default e^(S - lse), S already scaled.
template <class Acc, class ExpRow>
void probabilities(Acc* p, const TilePair<Acc>& t, const AttentionShape& s, ExpRow exp_row) {
  for (int64_t r = 0; r < t.rows; ++r) {
    Acc* row = p + r * kBc;
    // Keys [visible, kBc) are masked (causal) or padding, keys [0, first) before the window or
    // in an earlier document.
    const int64_t visible = std::min(t.cols, s.last_key(t.q0 + r) - t.k0 + 1);
    const int64_t first = std::max<int64_t>(0, s.first_key(t.b, t.q0 + r) - t.k0);
    if (visible <= first) {
      std::fill(row, row + kBc, Acc(0));
      continue;
    }
    mask_outside(row, kBc, first, visible);
    exp_row(row, t.lse[r]);
  }
}
template <class Acc>
void probabilities(Acc* p, const TilePair<Acc>& t, const AttentionShape& s) {
  probabilities(p, t, s, [](Acc* row, Acc lse) { exp_shifted(row, lse); });
}

// ds (rows, kBc) = dS = P * (dP - delta), dP given in ds.
template <class Acc>
void score_gradients(Acc* ds, const Acc* p, const TilePair<Acc>& t) {
  for (int64_t r = 0; r < t.rows; ++r) {
    const Acc delta = t.delta[r];
    for (int64_t c = 0; c < kBc; c += Simd<Acc>::kLanes)
      store(ds + r * kBc + c, load(p + r * kBc + c) * (load(ds + r * kBc + c) - delta));
  }
}

// Note [Backward tile policies]
// The schedules (Note [Backward schedules]) are written once over a policy that says how the
// query side (q, dout) and key side (k, v) of a tile pair are held and how one pair's
// contributions are computed: F32Tiles (Acc tiles and FMA products, any T) or Bf16Tiles
// (packed bf16 pairs and vdpbf16ps, Note [bf16 tile products]). A policy gives
//   query_sizes(rows) / load_queries: the query-side arrays of `rows` rows from position t0;
//   key_sizes() / load_keys: one key tile's arrays;
//   pair_sizes(): the scratch of one pair;
//   tile(...): the pair's contributions, dq, dk, dv (+=, each may be null);
//   dq_scale, dk_scale: the factors dq and dk take when stored.

// The f32-tile policy: Acc tiles, FMA products (attention_tile.h).
template <class T>
struct F32Tiles {
  using Acc = acc_t<T>;
  HeadsView<const T> q, dout, k, v;
  int64_t HS, HSp;
  Acc scale;

  // q, scaled (Note [Scale folded into q]), and dout: (rows, HSp) each.
  static constexpr size_t kQueryArrays = 2, kKeyArrays = 3, kPairArrays = 2;
  std::array<int64_t, kQueryArrays> query_sizes(int64_t rows) const { return {rows * HSp, rows * HSp}; }
  void load_queries(Acc* const* a, int64_t b, int64_t h, int64_t t0, int64_t rows) const {
    load_rows(a[0], HSp, q.row(b, h, t0), q.time_stride, rows, HS, scale);
    load_rows(a[1], HSp, dout.row(b, h, t0), dout.time_stride, rows, HS);
  }
  // k (kBc, HSp) when need_k (only dq reads it), k^T and v^T (HSp, kBc).
  std::array<int64_t, kKeyArrays> key_sizes() const { return {kBc * HSp, HSp * kBc, HSp * kBc}; }
  void load_keys(Acc* const* a, int64_t b, int64_t g, int64_t k0, int64_t cols, bool need_k) const {
    if (need_k) load_rows(a[0], HSp, k.row(b, g, k0), k.time_stride, cols, HS);
    load_rows_transposed(a[1], kBc, k.row(b, g, k0), k.time_stride, cols, HS);
    load_rows_transposed(a[2], kBc, v.row(b, g, k0), v.time_stride, cols, HS);
  }
  // p, ds (kBr, kBc).
  std::array<int64_t, kPairArrays> pair_sizes() const { return {kBr * kBc, kBr * kBc}; }
  Acc dq_scale() const { return scale; }
  Acc dk_scale() const { return Acc(1); }  // q was scaled as it was loaded

  // The gradient contributions of one tile pair (FlashAttention-2, Algorithm 2), with the
  // query tile already scaled (Note [Scale folded into q]):
  //   S = (scale Q) K^T,  P = e^(S - lse) (masked),  dV += P^T dO,  dP = dO V^T,
  //   dS = P * (dP - delta),  dK += dS^T (scale Q),  dQ += dS K.
  // `query_row` is the query tile's first row in the query arrays. Out of line so that every
  // schedule runs the same machine code on the same values: the bits of every contribution
  // cannot depend on which schedule asked.
  [[gnu::noinline]] void tile(Acc* const* qa, int64_t query_row, Acc* const* ka, Acc* const* pa,
                              const TilePair<Acc>& t, const AttentionShape& s, Acc* dq, Acc* dk,
                              Acc* dv) const {
    const Acc *tq = qa[0] + query_row * HSp, *tdout = qa[1] + query_row * HSp;
    const Acc *tk = ka[0], *kt = ka[1], *vt = ka[2];
    Acc *p = pa[0], *ds = pa[1];
    tile_matmul<false, false>(p, kBc, tq, HSp, kt, kBc, t.rows, kBc, HS);
    probabilities(p, t, s);
    if (dv) {
      tile_matmul<true, true>(dv, HSp, p, kBc, tdout, HSp, t.cols, HSp, t.rows);
    }
    tile_matmul<false, false>(ds, kBc, tdout, HSp, vt, kBc, t.rows, kBc, HS);
    score_gradients(ds, p, t);
    if (dk) {
      tile_matmul<true, true>(dk, HSp, ds, kBc, tq, HSp, t.cols, HSp, t.rows);
    }
    if (dq) {
      tile_matmul<false, true>(dq, HSp, ds, kBc, tk, HSp, t.rows, HSp, t.cols);
    }
  }
};

#if TRIDENT_ATTENTION_BF16_DOT
// p (rows, kBc) = S, unscaled, becomes P = e^(scale S - lse), zero where masked (scale in the
// exponent: Note [bf16 forward]); then P's query rows 2i, 2i+1 go interleaved into
// p_pairs (pairs(rows), kBc), the A operand of dV = P^T dO.
void probabilities_to_pairs(float* p, Pair* p_pairs, const TilePair<float>& t, const AttentionShape& s,
                            float scale) {
  const __m512 vscale = _mm512_set1_ps(scale);
  probabilities(p, t, s, [vscale](float* row, float lse) {
    const __m512 minus_lse = _mm512_set1_ps(-lse);
    for (int64_t c = 0; c < kBc; c += 16)
      _mm512_storeu_ps(row + c, exp_bf16_probabilities(_mm512_fmadd_ps(_mm512_loadu_ps(row + c), vscale, minus_lse)));
  });
  round_row_pairs(p_pairs, kBc, p, kBc, t.rows, kBc);
}

// dS = P * (dP - delta) (rows, kBc), rounded straight into the two forms its products read:
// query-row pairs ds_pairs (pairs(rows), kBc) for dK = dS^T Q, and row pairs ds_rows (rows,
// kBc / 2) for dQ = dS K. The row past an odd `rows` is zero in ds_pairs.
void score_gradients_to_pairs(Pair* ds_pairs, Pair* ds_rows, const float* p, const float* dp,
                              const TilePair<float>& t) {
  for (int64_t r = 0; r < t.rows; r += 2) {
    const bool has_odd = r + 1 < t.rows;
    const __m512 delta0 = _mm512_set1_ps(t.delta[r]), delta1 = _mm512_set1_ps(has_odd ? t.delta[r + 1] : 0.0f);
    auto ds = [&](int64_t row, int64_t c, __m512 delta) {
      return _mm512_mul_ps(_mm512_loadu_ps(p + row * kBc + c), _mm512_sub_ps(_mm512_loadu_ps(dp + row * kBc + c), delta));
    };
    for (int64_t c = 0; c < kBc; c += 32) {
      const __m512 d0 = ds(r, c, delta0), d0_hi = ds(r, c + 16, delta0);
      const __m512 d1 = has_odd ? ds(r + 1, c, delta1) : _mm512_setzero_ps();
      const __m512 d1_hi = has_odd ? ds(r + 1, c + 16, delta1) : _mm512_setzero_ps();
      _mm512_storeu_si512(ds_pairs + r / 2 * kBc + c, interleave_pairs(d0, d1));
      _mm512_storeu_si512(ds_pairs + r / 2 * kBc + c + 16, interleave_pairs(d0_hi, d1_hi));
      _mm512_storeu_si512(ds_rows + r * (kBc / 2) + c / 2, in_order_pairs(d0, d0_hi));
      if (has_odd) _mm512_storeu_si512(ds_rows + (r + 1) * (kBc / 2) + c / 2, in_order_pairs(d1, d1_hi));
    }
  }
}

// The bf16 policy (Note [bf16 tile products]): every product by vdpbf16ps on packed pairs;
// P and dS rounded to bf16 for theirs; scale applied to the f32 scores and to dq, dk on store.
struct Bf16Tiles {
  using Acc = float;
  HeadsView<const bf16> q, dout, k, v;
  int64_t HS, HSp;
  float scale;

  int64_t P() const { return pairs(HS); }
  // q and dout as pair rows (rows, pairs(HS)) and in VNNI form (pairs(rows), HSp).
  static constexpr size_t kQueryArrays = 4, kKeyArrays = 3, kPairArrays = 5;
  std::array<int64_t, kQueryArrays> query_sizes(int64_t rows) const {
    return {rows * P(), pairs(rows) * HSp, rows * P(), pairs(rows) * HSp};
  }
  static Pair* words(float* a) { return reinterpret_cast<Pair*>(a); }
  void load_queries(float* const* a, int64_t b, int64_t h, int64_t t0, int64_t rows) const {
    load_pair_rows(words(a[0]), P(), q.row(b, h, t0), q.time_stride, rows, HS);
    load_vnni(words(a[1]), HSp, q.row(b, h, t0), q.time_stride, rows, HS);
    load_pair_rows(words(a[2]), P(), dout.row(b, h, t0), dout.time_stride, rows, HS);
    load_vnni(words(a[3]), HSp, dout.row(b, h, t0), dout.time_stride, rows, HS);
  }
  // k in VNNI form (kBc / 2, HSp) when need_k; k and v as pair columns (pairs(HS), kBc).
  std::array<int64_t, kKeyArrays> key_sizes() const { return {kBc / 2 * HSp, P() * kBc, P() * kBc}; }
  void load_keys(float* const* a, int64_t b, int64_t g, int64_t k0, int64_t cols, bool need_k) const {
    if (need_k) load_vnni(words(a[0]), HSp, k.row(b, g, k0), k.time_stride, cols, HS);
    load_pair_columns(words(a[1]), kBc, k.row(b, g, k0), k.time_stride, cols, HS);
    load_pair_columns(words(a[2]), kBc, v.row(b, g, k0), v.time_stride, cols, HS);
  }
  // p, dp (kBr, kBc) f32; P's and dS's query-row pairs (kBr / 2, kBc) and dS's row pairs
  // (kBr, kBc / 2), all in floats.
  std::array<int64_t, kPairArrays> pair_sizes() const {
    return {kBr * kBc, kBr * kBc, kBr / 2 * kBc, kBr / 2 * kBc, kBr * kBc / 2};
  }
  float dq_scale() const { return scale; }
  float dk_scale() const { return scale; }

  // F32Tiles::tile's products, with the query rows unscaled: S = scale (Q K^T),
  // dK += scale dS^T Q (the factor on store), dQ += scale dS K (likewise). As in the forward
  // (Note [bf16 forward]), the scale goes into the exponent, P and dS are rounded to pairs
  // as they are made, and dV, dK, dQ sum straight into their accumulators (Into::kAdd).
  [[gnu::noinline]] void tile(float* const* qa, int64_t query_row, float* const* ka,
                              float* const* pa, const TilePair<float>& t, const AttentionShape& s,
                              float* dq, float* dk, float* dv) const {
    const Pair *q_pairs = words(qa[0]) + query_row * P(), *q_vnni = words(qa[1]) + query_row / 2 * HSp;
    const Pair *dout_pairs = words(qa[2]) + query_row * P(), *dout_vnni = words(qa[3]) + query_row / 2 * HSp;
    const Pair *k_vnni = words(ka[0]), *kt = words(ka[1]), *vt = words(ka[2]);
    float *p = pa[0], *dp = pa[1];
    Pair *p_pairs = words(pa[2]), *ds_pairs = words(pa[3]), *ds_rows = words(pa[4]);
    tile_dot<false>(p, kBc, q_pairs, P(), kt, kBc, t.rows, kBc, P());
    if (!(scale > 0)) scale_scores(p, t.rows * kBc, scale);
    probabilities_to_pairs(p, p_pairs, t, s, scale > 0 ? scale : 1.0f);
    if (dv) tile_dot<true, Into::kAdd>(dv, HSp, p_pairs, kBc, dout_vnni, HSp, t.cols, HSp, pairs(t.rows));
    tile_dot<false>(dp, kBc, dout_pairs, P(), vt, kBc, t.rows, kBc, P());
    score_gradients_to_pairs(ds_pairs, ds_rows, p, dp, t);
    if (dk) tile_dot<true, Into::kAdd>(dk, HSp, ds_pairs, kBc, q_vnni, HSp, t.cols, HSp, pairs(t.rows));
    if (dq) tile_dot<false, Into::kAdd>(dq, HSp, ds_rows, kBc / 2, k_vnni, HSp, t.rows, HSp, pairs(t.cols));
  }
};
#endif

// a followed by b.
template <size_t N, size_t M>
std::array<int64_t, N + M> concat(const std::array<int64_t, N>& a, const std::array<int64_t, M>& b) {
  std::array<int64_t, N + M> out{};
  std::copy(a.begin(), a.end(), out.begin());
  std::copy(b.begin(), b.end(), out.begin() + N);
  return out;
}

// Note [Backward schedules]
// Every gradient element must be written by one thread in a fixed order, without atomics.
// Two ways to split the work:
//   fused: one task per (batch, kv head). It loops over the group's query heads, then key
//     tiles, then query tiles, accumulating dk, dv of the whole head and dq of the current
//     query head in (T, HSp) buffers. Each tile pair costs 5 tile products (S, dV, dP, dK,
//     dQ) but there are only B * NKV tasks.
//   two-pass: one task per (batch, kv head, key tile) accumulating that tile's dk, dv over
//     the group's heads and query tiles (4 products: S, dV, dP, dK), then one task per
//     (batch, query head, query tile) accumulating its dq over key tiles (3 products: S,
//     dP, dQ). 7 products per pair, but tile-sized tasks that keep every thread busy.
// Both accumulate each element of dk/dv over (query head, query tile) and each element of
// dq over key tiles in the same increasing order, starting from zero, with the same
// policy's tile routine on the same values, and scale and round them with the same
// store_rows. So they give identical bits, and we may pick by speed, which depends on the
// thread count: fused takes ~5 * ceil(tasks / threads) tile-pair units of time, two-pass
// ~7 * tasks / threads. With one thread (or inside a parallel region) fused always wins; with
// B * NKV = 1 and 2 threads, two-pass does. The op suite checks 1 vs 2 threads bitwise, which
// compares the two schedules on its single-kv-head cases.
bool prefer_fused(int64_t tasks, int64_t threads) {
  return 5 * ceil_div(tasks, threads) * threads <= 7 * tasks;
}

template <class T, class Tiles, class Acc = acc_t<T>>
struct BackwardTasks {
  HeadsView<T> dq, dk, dv;
  const Tiles& tiles;
  const Acc* lse;    // (B, NH, T)
  const Acc* delta;  // (B, NH, T)
  const AttentionShape& s;
  int64_t HSp, group, query_tiles, key_tiles;

  static constexpr size_t kQ = Tiles::kQueryArrays, kK = Tiles::kKeyArrays, kP = Tiles::kPairArrays;

  // The query tiles [first_query_tile(j), query_tiles_end(b, j)) of row b see key tile j;
  // query tile i sees key tiles [first_key_tile(b, i), key_tiles_seen(i)).
  int64_t first_query_tile(int64_t j) const { return s.causal ? j * kBc / kBr : 0; }
  int64_t query_tiles_end(int64_t b, int64_t j) const {
    return s.last_query(b, std::min(s.T, (j + 1) * kBc) - 1) / kBr + 1;
  }
  int64_t first_key_tile(int64_t b, int64_t i) const { return s.first_key(b, i * kBr) / kBc; }
  int64_t key_tiles_seen(int64_t i) const {
    return s.causal ? (std::min(s.T, (i + 1) * kBr) - 1) / kBc + 1 : key_tiles;
  }
  int64_t row_index(int64_t b, int64_t h, int64_t t) const { return (b * s.NH + h) * s.T + t; }
  TilePair<Acc> pair(int64_t b, int64_t h, int64_t q0, int64_t k0) const {
    const int64_t rows0 = row_index(b, h, 0);
    return {lse + rows0 + q0, delta + rows0 + q0, b, q0, std::min(kBr, s.T - q0), k0, std::min(kBc, s.T - k0)};
  }

  // fused: the query side of one whole query head (T rows); dq, dk, dv accumulators (T, HSp);
  // one key tile; one pair's scratch.
  std::array<int64_t, kQ + 3 + kK + kP> fused_scratch() const {
    const int64_t head = s.T * HSp;
    return concat(concat(tiles.query_sizes(s.T), std::array<int64_t, 3>{head, head, head}),
                  concat(tiles.key_sizes(), tiles.pair_sizes()));
  }
  template <class Buffers>
  void fused(int64_t b, int64_t g, const Buffers& buf) const {
    Acc* const* qa = buf.from(0);
    Acc *dq_acc = buf[kQ], *dk_acc = buf[kQ + 1], *dv_acc = buf[kQ + 2];
    Acc* const* ka = buf.from(kQ + 3);
    Acc* const* pa = buf.from(kQ + 3 + kK);
    std::fill(dk_acc, dk_acc + s.T * HSp, Acc(0));
    std::fill(dv_acc, dv_acc + s.T * HSp, Acc(0));
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
      tiles.load_queries(qa, b, h, 0, s.T);
      std::fill(dq_acc, dq_acc + s.T * HSp, Acc(0));
      for (int64_t j = 0; j < key_tiles; ++j) {
        const int64_t k0 = j * kBc;
        tiles.load_keys(ka, b, g, k0, std::min(kBc, s.T - k0), /*need_k=*/true);
        for (int64_t i = first_query_tile(j); i < query_tiles_end(b, j); ++i) {
          const int64_t q0 = i * kBr;
          tiles.tile(qa, q0, ka, pa, pair(b, h, q0, k0), s, dq_acc + q0 * HSp, dk_acc + k0 * HSp,
                     dv_acc + k0 * HSp);
        }
      }
      store_rows(dq.row(b, h, 0), dq.time_stride, dq_acc, HSp, s.T, s.HS, tiles.dq_scale());
    }
    store_rows(dk.row(b, g, 0), dk.time_stride, dk_acc, HSp, s.T, s.HS, tiles.dk_scale());
    store_rows(dv.row(b, g, 0), dv.time_stride, dv_acc, HSp, s.T, s.HS, Acc(1));
  }

  // two-pass, key side: one key tile; the query side of one query tile; one pair's scratch;
  // dk, dv accumulators (kBc, HSp).
  std::array<int64_t, kK + kQ + kP + 2> key_pass_scratch() const {
    return concat(concat(tiles.key_sizes(), tiles.query_sizes(kBr)),
                  concat(tiles.pair_sizes(), std::array<int64_t, 2>{kBc * HSp, kBc * HSp}));
  }
  template <class Buffers>
  void key_pass(int64_t b, int64_t g, int64_t j, const Buffers& buf) const {
    Acc* const* ka = buf.from(0);
    Acc* const* qa = buf.from(kK);
    Acc* const* pa = buf.from(kK + kQ);
    Acc *dk_acc = buf[kK + kQ + kP], *dv_acc = buf[kK + kQ + kP + 1];
    const int64_t k0 = j * kBc, cols = std::min(kBc, s.T - k0);
    tiles.load_keys(ka, b, g, k0, cols, /*need_k=*/false);
    std::fill(dk_acc, dk_acc + cols * HSp, Acc(0));
    std::fill(dv_acc, dv_acc + cols * HSp, Acc(0));
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
      for (int64_t i = first_query_tile(j); i < query_tiles_end(b, j); ++i) {
        const int64_t q0 = i * kBr;
        tiles.load_queries(qa, b, h, q0, std::min(kBr, s.T - q0));
        tiles.tile(qa, 0, ka, pa, pair(b, h, q0, k0), s, nullptr, dk_acc, dv_acc);
      }
    }
    store_rows(dk.row(b, g, k0), dk.time_stride, dk_acc, HSp, cols, s.HS, tiles.dk_scale());
    store_rows(dv.row(b, g, k0), dv.time_stride, dv_acc, HSp, cols, s.HS, Acc(1));
  }

  // two-pass, query side: the query side of one query tile; one key tile; one pair's
  // scratch; dq accumulator (kBr, HSp).
  std::array<int64_t, kQ + kK + kP + 1> query_pass_scratch() const {
    return concat(concat(tiles.query_sizes(kBr), tiles.key_sizes()),
                  concat(tiles.pair_sizes(), std::array<int64_t, 1>{kBr * HSp}));
  }
  template <class Buffers>
  void query_pass(int64_t b, int64_t h, int64_t i, const Buffers& buf) const {
    Acc* const* qa = buf.from(0);
    Acc* const* ka = buf.from(kQ);
    Acc* const* pa = buf.from(kQ + kK);
    Acc* dq_acc = buf[kQ + kK + kP];
    const int64_t q0 = i * kBr, rows = std::min(kBr, s.T - q0), g = h / group;
    tiles.load_queries(qa, b, h, q0, rows);
    std::fill(dq_acc, dq_acc + rows * HSp, Acc(0));
    for (int64_t j = first_key_tile(b, i); j < key_tiles_seen(i); ++j) {
      const int64_t k0 = j * kBc;
      tiles.load_keys(ka, b, g, k0, std::min(kBc, s.T - k0), /*need_k=*/true);
      tiles.tile(qa, 0, ka, pa, pair(b, h, q0, k0), s, dq_acc, nullptr, nullptr);
    }
    store_rows(dq.row(b, h, q0), dq.time_stride, dq_acc, HSp, rows, s.HS, tiles.dq_scale());
  }
};

// delta (B, NH, T) = rowsum(dout * out): FlashAttention-2's D_i = sum_j P_ij dP_ij.
// Summed in double and rounded once: dS = P (dP - D) cancels (dP and D are HS-term dot
// products much larger than their difference in the rows that see few keys), and D's
// rounding error, unlike dP's, is the same for a whole row, so it does not average out over
// the keys. With an f32 sum, the worst dq error at T = 130, HS = 64 was 1.1x the op suite's
// tolerance; with a double sum, 0.46x. It costs O(T * HS) per head, nothing next to the tiles.
template <class T, class Acc = acc_t<T>>
void row_dot(Acc* delta, HeadsView<const T> dout, HeadsView<const T> out, const AttentionShape& s) {
  parallel_for(0, s.B * s.NH * s.T, std::max<int64_t>(1, 16384 / s.HS), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t t = row % s.T, bh = row / s.T;
      const T* g = dout.row(bh / s.NH, bh % s.NH, t);
      const T* o = out.row(bh / s.NH, bh % s.NH, t);
      double sum = 0;
      for (int64_t d = 0; d < s.HS; ++d) sum += static_cast<double>(g[d]) * static_cast<double>(o[d]);
      delta[row] = static_cast<Acc>(sum);
    }
  });
}

// Runs the backward's tile pairs with `tiles` on the schedule that is fastest here.
template <class T, class Tiles, class Acc = acc_t<T>>
void run_backward(HeadsView<T> dq, HeadsView<T> dk, HeadsView<T> dv, const Tiles& tiles,
                  const Acc* lse, const Acc* delta, const AttentionShape& s) {
  const BackwardTasks<T, Tiles> tasks{dq, dk, dv, tiles, lse, delta, s, round_up(s.HS, kColAlign),
                                      s.NH / s.NKV, ceil_div(s.T, kBr), ceil_div(s.T, kBc)};
  const int64_t threads = omp_in_parallel() ? 1 : num_threads();
  if (prefer_fused(s.B * s.NKV, threads)) {
    parallel_for(0, s.B * s.NKV, 1, [&](int64_t begin, int64_t end) {
      const auto sizes = tasks.fused_scratch();
      const TileBuffers<Acc, sizes.size()> buf(sizes);
      for (int64_t t = begin; t < end; ++t) tasks.fused(t / s.NKV, t % s.NKV, buf);
    });
    return;
  }
  // Tiles in balanced order under the causal mask (Note [Balancing causal tiles]).
  const int64_t nk = tasks.key_tiles, nq = tasks.query_tiles;
  parallel_for(0, s.B * s.NKV * nk, 1, [&](int64_t begin, int64_t end) {
    const auto sizes = tasks.key_pass_scratch();
    const TileBuffers<Acc, sizes.size()> buf(sizes);
    for (int64_t t = begin; t < end; ++t) {
      const int64_t bg = t / nk, j = s.causal ? balanced_tile(t % nk, nk) : t % nk;
      tasks.key_pass(bg / s.NKV, bg % s.NKV, j, buf);
    }
  });
  parallel_for(0, s.B * s.NH * nq, 1, [&](int64_t begin, int64_t end) {
    const auto sizes = tasks.query_pass_scratch();
    const TileBuffers<Acc, sizes.size()> buf(sizes);
    for (int64_t t = begin; t < end; ++t) {
      const int64_t bh = t / nq, i = s.causal ? balanced_tile(t % nq, nq) : t % nq;
      tasks.query_pass(bh / s.NH, bh % s.NH, i, buf);
    }
  });
}

}  // namespace

template <class T>
void attention_backward(HeadsView<T> dq, HeadsView<T> dk, HeadsView<T> dv,
                        HeadsView<const T> dout, HeadsView<const T> q, HeadsView<const T> k,
                        HeadsView<const T> v, HeadsView<const T> out, const acc_t<T>* lse,
                        const AttentionShape& s) {
  using Acc = acc_t<T>;
  if (s.B * s.NH * s.T == 0) return;
  const DataPtr delta_block = host_allocator().allocate(
      static_cast<size_t>(s.B * s.NH * s.T) * sizeof(Acc), MemoryCategory::kActivation);
  Acc* delta = static_cast<Acc*>(delta_block.get());
  row_dot(delta, dout, out, s);
  const int64_t HSp = round_up(s.HS, kColAlign);
#if TRIDENT_ATTENTION_BF16_DOT
  if constexpr (std::is_same_v<T, bf16>) {
    if (bf16_tile_products())
      return run_backward(dq, dk, dv, Bf16Tiles{q, dout, k, v, s.HS, HSp, static_cast<float>(s.scale)}, lse,
                          delta, s);
  }
#endif
  run_backward(dq, dk, dv, F32Tiles<T>{q, dout, k, v, s.HS, HSp, static_cast<Acc>(s.scale)}, lse, delta, s);
}

#define TRI_INSTANTIATE(T)                                                                  \
  template void attention_backward<T>(HeadsView<T>, HeadsView<T>, HeadsView<T>,             \
                                      HeadsView<const T>, HeadsView<const T>,               \
                                      HeadsView<const T>, HeadsView<const T>,               \
                                      HeadsView<const T>, const acc_t<T>*, const AttentionShape&);
TRI_FOR_EACH_FLOATING_TYPE(TRI_INSTANTIATE)
#undef TRI_INSTANTIATE

}  // namespace trident::kernels::cpu
