// The backward of the tiled attention (contract in attention.h), FlashAttention-2 style:
// every score tile is recomputed from q, k and the forward's logsumexp, and dq, dk, dv are
// accumulated tile by tile in acc_t<T> without ever holding a (T, T) matrix. Two schedules
// share one tile routine and give the same bits (Note [Backward schedules]).
#include <algorithm>

#include "core/parallel.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_tile.h"

namespace trident::kernels::cpu {
namespace {
using namespace attention_tile;

// The operands of one (query tile, key tile) pair, as Acc tiles.
template <class Acc>
struct TilePair {
  const Acc* q;      // (rows, HSp) queries
  const Acc* dout;   // (rows, HSp) output gradient
  const Acc* lse;    // (rows) logsumexp of the score rows, from the forward
  const Acc* delta;  // (rows) rowsum(dout * out)
  const Acc* k;      // (cols, HSp) keys (read only for dq)
  const Acc* kt;     // (HS, kBc) keys, transposed
  const Acc* vt;     // (HS, kBc) values, transposed
  int64_t q0, rows, k0, cols;  // first query / key position and sizes of the two tiles
};

// The gradient contributions of one tile pair (FlashAttention-2, Algorithm 2), with the
// query tile already scaled (Note [Scale folded into q]):
//   S = (scale Q) K^T,  P = e^(S - lse) (masked),  dV += P^T dO,  dP = dO V^T,
//   dS = P * (dP - delta),  dK += dS^T (scale Q),  dQ += dS K.
// dQ's factor `scale` is applied once when it is stored. dq (rows, HSp), dk
// and dv (cols, HSp) accumulate (+=, Note [Blocked accumulation]) and may each be null when
// not wanted; p and ds are (kBr, kBc) scratch, part (max(kBr, kBc), HSp). Out of line so that
// both schedules run the same machine code on the same values: the bits of every
// contribution cannot depend on which schedule asked.
template <class Acc>
[[gnu::noinline]] void backward_tile(const TilePair<Acc>& t, const AttentionShape& s, int64_t HSp,
                                     Acc* p, Acc* ds, Acc* part, Acc* dq, Acc* dk, Acc* dv) {
  const int64_t HS = s.HS;
  tile_matmul<false, false>(p, kBc, t.q, HSp, t.kt, kBc, t.rows, kBc, HS);
  for (int64_t r = 0; r < t.rows; ++r) {
    Acc* row = p + r * kBc;
    // Keys [visible, kBc) are masked (causal) or padding, keys [0, first) before the window.
    const int64_t visible = std::min(t.cols, s.last_key(t.q0 + r) - t.k0 + 1);
    const int64_t first = std::max<int64_t>(0, s.first_key(t.q0 + r) - t.k0);
    if (visible <= first) {
      std::fill(row, row + kBc, Acc(0));
      continue;
    }
    mask_outside(row, kBc, first, visible);
    exp_shifted(row, t.lse[r]);
  }
  if (dv) {
    tile_matmul<true, false>(part, HSp, p, kBc, t.dout, HSp, t.cols, HSp, t.rows);
    add_tile(dv, part, t.cols * HSp);
  }
  tile_matmul<false, false>(ds, kBc, t.dout, HSp, t.vt, kBc, t.rows, kBc, HS);
  for (int64_t r = 0; r < t.rows; ++r) {
    const Acc delta = t.delta[r];
    for (int64_t c = 0; c < kBc; c += Simd<Acc>::kLanes)
      store(ds + r * kBc + c, load(p + r * kBc + c) * (load(ds + r * kBc + c) - delta));
  }
  if (dk) {
    tile_matmul<true, false>(part, HSp, ds, kBc, t.q, HSp, t.cols, HSp, t.rows);
    add_tile(dk, part, t.cols * HSp);
  }
  if (dq) {
    tile_matmul<false, false>(part, HSp, ds, kBc, t.k, HSp, t.rows, HSp, t.cols);
    add_tile(dq, part, t.rows * HSp);
  }
}

// Rows of the scratch tile holding one tile product of backward_tile.
inline constexpr int64_t kPart = std::max(kBr, kBc);

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
// backward_tile on the same Acc values, and scale and round them with the same store_rows.
// So they give identical bits, and we may pick by speed, which depends on the thread count:
// fused takes ~5 * ceil(tasks / threads) tile-pair units of time, two-pass ~7 * tasks /
// threads. With one thread (or inside a parallel region) fused always wins; with B * NKV =
// 1 and 2 threads, two-pass does. The op suite checks 1 vs 2 threads bitwise, which
// compares the two schedules on its single-kv-head cases.
bool prefer_fused(int64_t tasks, int64_t threads) {
  return 5 * ceil_div(tasks, threads) * threads <= 7 * tasks;
}

template <class T, class Acc = acc_t<T>>
struct BackwardTasks {
  HeadsView<T> dq, dk, dv;
  HeadsView<const T> dout, q, k, v;
  const Acc* lse;    // (B, NH, T)
  const Acc* delta;  // (B, NH, T)
  const AttentionShape& s;
  int64_t HSp, group, query_tiles, key_tiles;
  Acc scale;

  // The query tiles [first_query_tile(j), query_tiles_end(j)) see key tile j; query tile i
  // sees key tiles [first_key_tile(i), key_tiles_seen(i)).
  int64_t first_query_tile(int64_t j) const { return s.causal ? j * kBc / kBr : 0; }
  int64_t query_tiles_end(int64_t j) const {
    return s.last_query(std::min(s.T, (j + 1) * kBc) - 1) / kBr + 1;
  }
  int64_t first_key_tile(int64_t i) const { return s.first_key(i * kBr) / kBc; }
  int64_t key_tiles_seen(int64_t i) const {
    return s.causal ? (std::min(s.T, (i + 1) * kBr) - 1) / kBc + 1 : key_tiles;
  }
  int64_t row_index(int64_t b, int64_t h, int64_t t) const { return (b * s.NH + h) * s.T + t; }

  // Loads key tile j of kv head g: k (cols, HSp) when k_tile is not null, k^T and v^T (HS, kBc).
  int64_t load_key_tile(int64_t b, int64_t g, int64_t j, Acc* k_tile, Acc* kt, Acc* vt) const {
    const int64_t k0 = j * kBc, cols = std::min(kBc, s.T - k0);
    if (k_tile) load_rows(k_tile, HSp, k.row(b, g, k0), k.time_stride, cols, s.HS);
    load_rows_transposed(kt, kBc, k.row(b, g, k0), k.time_stride, cols, s.HS);
    load_rows_transposed(vt, kBc, v.row(b, g, k0), v.time_stride, cols, s.HS);
    return cols;
  }

  // fused: q, dout of one query head (T, HSp); dq, dk, dv accumulators (T, HSp);
  // k (kBc, HSp); k^T, v^T (HSp, kBc); p, ds (kBr, kBc); one tile's product (kPart, HSp).
  std::array<int64_t, 11> fused_scratch() const {
    const int64_t head = s.T * HSp;
    return {head,      head,      head,      head,      head,     kBc * HSp,
            HSp * kBc, HSp * kBc, kBr * kBc, kBr * kBc, kPart * HSp};
  }
  void fused(int64_t b, int64_t g, const TileBuffers<Acc, 11>& buf) const {
    Acc *q_head = buf[0], *dout_head = buf[1], *dq_acc = buf[2], *dk_acc = buf[3], *dv_acc = buf[4];
    Acc *k_tile = buf[5], *kt = buf[6], *vt = buf[7], *p = buf[8], *ds = buf[9], *part = buf[10];
    std::fill(dk_acc, dk_acc + s.T * HSp, Acc(0));
    std::fill(dv_acc, dv_acc + s.T * HSp, Acc(0));
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
      load_rows(q_head, HSp, q.row(b, h, 0), q.time_stride, s.T, s.HS, scale);
      load_rows(dout_head, HSp, dout.row(b, h, 0), dout.time_stride, s.T, s.HS);
      std::fill(dq_acc, dq_acc + s.T * HSp, Acc(0));
      const int64_t rows0 = row_index(b, h, 0);
      for (int64_t j = 0; j < key_tiles; ++j) {
        const int64_t k0 = j * kBc, cols = load_key_tile(b, g, j, k_tile, kt, vt);
        for (int64_t i = first_query_tile(j); i < query_tiles_end(j); ++i) {
          const int64_t q0 = i * kBr, rows = std::min(kBr, s.T - q0);
          const TilePair<Acc> t{q_head + q0 * HSp, dout_head + q0 * HSp, lse + rows0 + q0,
                                delta + rows0 + q0, k_tile, kt, vt, q0, rows, k0, cols};
          backward_tile<Acc>(t, s, HSp, p, ds, part, dq_acc + q0 * HSp,
                        dk_acc + k0 * HSp, dv_acc + k0 * HSp);
        }
      }
      store_rows(dq.row(b, h, 0), dq.time_stride, dq_acc, HSp, s.T, s.HS, scale);
    }
    store_rows(dk.row(b, g, 0), dk.time_stride, dk_acc, HSp, s.T, s.HS, Acc(1));
    store_rows(dv.row(b, g, 0), dv.time_stride, dv_acc, HSp, s.T, s.HS, Acc(1));
  }

  // two-pass, key side: k^T, v^T (HSp, kBc); q, dout (kBr, HSp); p, ds (kBr, kBc);
  // dk, dv accumulators (kBc, HSp); one tile's product (kPart, HSp).
  std::array<int64_t, 9> key_pass_scratch() const {
    return {HSp * kBc, HSp * kBc, kBr * HSp, kBr * HSp,  kBr * kBc,
            kBr * kBc, kBc * HSp, kBc * HSp, kPart * HSp};
  }
  void key_pass(int64_t b, int64_t g, int64_t j, const TileBuffers<Acc, 9>& buf) const {
    Acc *kt = buf[0], *vt = buf[1], *q_tile = buf[2], *dout_tile = buf[3], *p = buf[4], *ds = buf[5];
    Acc *dk_acc = buf[6], *dv_acc = buf[7], *part = buf[8];
    const int64_t k0 = j * kBc, cols = load_key_tile(b, g, j, nullptr, kt, vt);
    std::fill(dk_acc, dk_acc + cols * HSp, Acc(0));
    std::fill(dv_acc, dv_acc + cols * HSp, Acc(0));
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
      const int64_t rows0 = row_index(b, h, 0);
      for (int64_t i = first_query_tile(j); i < query_tiles_end(j); ++i) {
        const int64_t q0 = i * kBr, rows = std::min(kBr, s.T - q0);
        load_rows(q_tile, HSp, q.row(b, h, q0), q.time_stride, rows, s.HS, scale);
        load_rows(dout_tile, HSp, dout.row(b, h, q0), dout.time_stride, rows, s.HS);
        const TilePair<Acc> t{q_tile, dout_tile, lse + rows0 + q0, delta + rows0 + q0, nullptr,
                              kt, vt, q0, rows, k0, cols};
        backward_tile<Acc>(t, s, HSp, p, ds, part, nullptr, dk_acc, dv_acc);
      }
    }
    store_rows(dk.row(b, g, k0), dk.time_stride, dk_acc, HSp, cols, s.HS, Acc(1));
    store_rows(dv.row(b, g, k0), dv.time_stride, dv_acc, HSp, cols, s.HS, Acc(1));
  }

  // two-pass, query side: q, dout (kBr, HSp); k (kBc, HSp); k^T, v^T (HSp, kBc);
  // p, ds (kBr, kBc); dq accumulator (kBr, HSp); one tile's product (kPart, HSp).
  std::array<int64_t, 9> query_pass_scratch() const {
    return {kBr * HSp, kBr * HSp, kBc * HSp, HSp * kBc,  HSp * kBc,
            kBr * kBc, kBr * kBc, kBr * HSp, kPart * HSp};
  }
  void query_pass(int64_t b, int64_t h, int64_t i, const TileBuffers<Acc, 9>& buf) const {
    Acc *q_tile = buf[0], *dout_tile = buf[1], *k_tile = buf[2], *kt = buf[3], *vt = buf[4];
    Acc *p = buf[5], *ds = buf[6], *dq_acc = buf[7], *part = buf[8];
    const int64_t q0 = i * kBr, rows = std::min(kBr, s.T - q0), g = h / group;
    const int64_t rows0 = row_index(b, h, 0);
    load_rows(q_tile, HSp, q.row(b, h, q0), q.time_stride, rows, s.HS, scale);
    load_rows(dout_tile, HSp, dout.row(b, h, q0), dout.time_stride, rows, s.HS);
    std::fill(dq_acc, dq_acc + rows * HSp, Acc(0));
    for (int64_t j = first_key_tile(i); j < key_tiles_seen(i); ++j) {
      const int64_t k0 = j * kBc, cols = load_key_tile(b, g, j, k_tile, kt, vt);
      const TilePair<Acc> t{q_tile, dout_tile, lse + rows0 + q0, delta + rows0 + q0, k_tile,
                            kt, vt, q0, rows, k0, cols};
      backward_tile<Acc>(t, s, HSp, p, ds, part, dq_acc, nullptr, nullptr);
    }
    store_rows(dq.row(b, h, q0), dq.time_stride, dq_acc, HSp, rows, s.HS, scale);
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

  const BackwardTasks<T> tasks{dq, dk, dv, dout, q, k, v, lse, delta, s,
                               round_up(s.HS, kColAlign), s.NH / s.NKV, ceil_div(s.T, kBr),
                               ceil_div(s.T, kBc), static_cast<Acc>(s.scale)};
  const int64_t threads = omp_in_parallel() ? 1 : num_threads();
  if (prefer_fused(s.B * s.NKV, threads)) {
    parallel_for(0, s.B * s.NKV, 1, [&](int64_t begin, int64_t end) {
      const TileBuffers<Acc, 11> buf(tasks.fused_scratch());
      for (int64_t t = begin; t < end; ++t) tasks.fused(t / s.NKV, t % s.NKV, buf);
    });
    return;
  }
  // Tiles in balanced order under the causal mask (Note [Balancing causal tiles]).
  const int64_t nk = tasks.key_tiles, nq = tasks.query_tiles;
  parallel_for(0, s.B * s.NKV * nk, 1, [&](int64_t begin, int64_t end) {
    const TileBuffers<Acc, 9> buf(tasks.key_pass_scratch());
    for (int64_t t = begin; t < end; ++t) {
      const int64_t bg = t / nk, j = s.causal ? balanced_tile(t % nk, nk) : t % nk;
      tasks.key_pass(bg / s.NKV, bg % s.NKV, j, buf);
    }
  });
  parallel_for(0, s.B * s.NH * nq, 1, [&](int64_t begin, int64_t end) {
    const TileBuffers<Acc, 9> buf(tasks.query_pass_scratch());
    for (int64_t t = begin; t < end; ++t) {
      const int64_t bh = t / nq, i = s.causal ? balanced_tile(t % nq, nq) : t % nq;
      tasks.query_pass(bh / s.NH, bh % s.NH, i, buf);
    }
  });
}

#define TRI_INSTANTIATE(T)                                                                  \
  template void attention_backward<T>(HeadsView<T>, HeadsView<T>, HeadsView<T>,             \
                                      HeadsView<const T>, HeadsView<const T>,               \
                                      HeadsView<const T>, HeadsView<const T>,               \
                                      HeadsView<const T>, const acc_t<T>*, const AttentionShape&);
TRI_FOR_EACH_FLOATING_TYPE(TRI_INSTANTIATE)
#undef TRI_INSTANTIATE

}  // namespace trident::kernels::cpu
