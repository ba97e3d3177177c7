// The forward for a few queries per row (decoding; contract in attention.h, Note [Decode-shaped
// attention]): one task per (batch row, kv head) that reads the row's cached keys and values once,
// a key tile at a time, for every query of every query head sharing that kv head. It gives
// attention_forward's tiled path's bits (Note [The tiled path's bits]). f32 and f64 only: the
// bf16 forward rounds its probabilities to bf16 (Note [bf16 forward]), so it keeps its own path.
#include <cmath>
#include <limits>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_tile.h"

namespace trident::kernels::cpu {
namespace {
using namespace attention_tile;

// Note [The tiled path's bits]
// Why does the decode-shaped path give the tiled path's bits, and what keeps it so? A query of
// the tiled forward (attention_forward.cc) visits the key tiles from the one holding its first
// key to the one holding its last, and for each:
//  * its scores, each a sum over the HS dim in increasing order from zero, one FMA per term, of
//    key * (query * scale) (tile_matmul: S^T = K (scale Q)^T);
//  * the tile's max m' (with m), the shift m' (0 while no key has been seen), e^(s - shift) per
//    key, their sum in key order from zero; alpha = e^(m - shift), l = alpha l + sum (one FMA);
//  * P V summed over the tile's keys in order from zero (one FMA a term), and acc = alpha acc +
//    P V (one FMA);
// and at the end out = acc * (1 / l), lse = m + log l. Every step here is the same operation on
// the same operands in the same order, lanes standing for other queries or keys. The keys a
// tile masks contribute exact zeros (e^-inf = 0 to sums, 0 v to P V), so this path leaves them
// out; and a query of several (Tq > 1) in one query tile that sees none of a tile's keys is
// left alone here, where the tiled path rescales it by e^0 = 1 and adds zeros (after its
// keys), or zeroes it (before its window: the same as starting at its first tile).
// tests/ops/attention_decode_test.cc checks the bits on both sides of kDecodeQueries.

// How many (batch row, kv head) pairs a thread takes at a time.
constexpr int64_t kGrain = 1;

// S^T (kRows, n) = K (kRows, HS) Q^T (HS, n): row r of `k` (row stride ldk) dotted with every
// column of qt (n columns, a multiple of the lane count), each summed over HS in order (Note [The
// tiled path's bits]); kRows accumulators of one vector of columns in registers at a time.
template <int kRows, class Acc>
void score_rows(Acc* st, const Acc* k, int64_t ldk, const Acc* qt, int64_t n, int64_t HS) {
  constexpr int kLanes = Simd<Acc>::kLanes;
  for (int64_t c = 0; c < n; c += kLanes) {
    Vec<Acc> acc[kRows] = {};
    for (int64_t d = 0; d < HS; ++d) {
      const Vec<Acc> b = load(qt + d * n + c);
      for (int r = 0; r < kRows; ++r) acc[r] += k[r * ldk + d] * b;
    }
    for (int r = 0; r < kRows; ++r) store(st + r * n + c, acc[r]);
  }
}

// S^T (rows, n) = K (rows, HS) Q^T (HS, n), eight key rows at a time.
template <class Acc>
void scores(Acc* st, const Acc* k, int64_t ldk, const Acc* qt, int64_t n, int64_t rows, int64_t HS) {
  constexpr int kBlock = 8;
  int64_t r = 0;
  for (; r + kBlock <= rows; r += kBlock) score_rows<kBlock>(st + r * n, k + r * ldk, ldk, qt, n, HS);
  for (; r + 2 <= rows; r += 2) score_rows<2>(st + r * n, k + r * ldk, ldk, qt, n, HS);
  if (r < rows) score_rows<1>(st + r * n, k + r * ldk, ldk, qt, n, HS);
}

// One query's state of the online softmax (Note [Online softmax] in attention_forward.cc).
template <class Acc>
struct QueryState {
  int64_t first, last;  // the key positions it sees
  Acc m, l;
  Acc alpha;     // the current tile's rescaling of l and the accumulator
  bool in_tile;  // whether the current tile holds any of its keys
};

template <class T>
struct DecodeTask {
  HeadsView<T> out;
  T* lse;
  HeadsView<const T> q, k, v;
  const AttentionShape& s;
  int64_t HSp;

  int64_t group() const { return s.NH / s.NKV; }
  // Query states per task: every query of the group's heads, as columns of Q^T and S^T.
  int64_t states() const { return group() * s.queries(); }
  int64_t columns() const { return round_up(states(), Simd<T>::kLanes); }

  // Scratch: Q^T (HS, n); S^T, then P^T (kBc, n); one query's scores (kBc); V's tile when it
  // cannot be read in place (kBc, HSp); P V and the accumulators (states, HSp).
  using Buffers = TileBuffers<T, 6>;
  std::array<int64_t, 6> scratch_sizes() const {
    const int64_t n = columns();
    return {s.HS * n, kBc * n, kBc, kBc * HSp, states() * HSp, states() * HSp};
  }

  // Kv head g of batch row b: state u is query u % Tq of query head g * group + u / Tq.
  void run(int64_t b, int64_t g, const Buffers& buf, std::vector<QueryState<T>>& state) const {
    T *qt = buf[0], *st = buf[1], *row = buf[2], *v_buf = buf[3], *pv = buf[4], *acc = buf[5];
    const int64_t Tq = s.queries(), U = states(), n = columns(), HS = s.HS;
    const T scale = static_cast<T>(s.scale);
    std::fill(qt, qt + HS * n, T(0));
    int64_t first_tile = std::numeric_limits<int64_t>::max(), end_key = 0;
    for (int64_t u = 0; u < U; ++u) {
      const int64_t h = g * group() + u / Tq, i = u % Tq, p = s.query_position(b, i);
      const T* qrow = q.row(b, h, i);
      for (int64_t d = 0; d < HS; ++d) qt[d * n + u] = qrow[d] * scale;  // Note [Scale folded into q]
      state[static_cast<size_t>(u)] = {s.first_key(b, p), s.last_key(p), -std::numeric_limits<T>::infinity(), T(0), T(0), false};
      first_tile = std::min(first_tile, s.first_key(b, p) / kBc);
      end_key = std::max(end_key, s.last_key(p) + 1);
    }
    std::fill(acc, acc + U * HSp, T(0));
    for (int64_t k0 = first_tile * kBc; k0 < end_key; k0 += kBc) {
      const int64_t cols = std::min(kBc, end_key - k0);
      const T* v_rows = v.row(b, g, k0);
      int64_t ldv = v.time_stride;
      if (HSp != HS) {  // P V's columns are HSp wide (tile_matmul's column block)
        load_rows(v_buf, HSp, v_rows, ldv, cols, HS);
        v_rows = v_buf;
        ldv = HSp;
      }
      scores(st, k.row(b, g, k0), k.time_stride, qt, n, cols, HS);
      // Each query's softmax step over its own keys of the tile; st becomes P^T, 0 where masked.
      for (int64_t u = 0; u < U; ++u) {
        QueryState<T>& q_state = state[static_cast<size_t>(u)];
        const int64_t c0 = std::clamp<int64_t>(q_state.first - k0, 0, cols);
        const int64_t c1 = std::clamp<int64_t>(q_state.last + 1 - k0, 0, cols);
        T m_new = q_state.m;
        for (int64_t c = c0; c < c1; ++c) {
          row[c] = st[c * n + u];
          m_new = row[c] > m_new ? row[c] : m_new;
        }
        const T shift = m_new == -std::numeric_limits<T>::infinity() ? T(0) : m_new;
        for (int64_t c = c0; c < c1; ++c) row[c] = math::exp(row[c] - shift);
        T sum = 0;
        for (int64_t c = c0; c < c1; ++c) sum += row[c];
        for (int64_t c = 0; c < cols; ++c) st[c * n + u] = c >= c0 && c < c1 ? row[c] : T(0);
        q_state.in_tile = c0 < c1;  // else a tile wholly outside this query's keys: left alone
        if (!q_state.in_tile) continue;
        q_state.alpha = math::exp(q_state.m - shift);
        q_state.l = q_state.alpha * q_state.l + sum;
        q_state.m = m_new;
      }
      // P V (U, HSp), each row summed over the tile's keys in order; acc = alpha acc + P V.
      tile_matmul<true, false>(pv, HSp, st, n, v_rows, ldv, U, HSp, cols);
      for (int64_t u = 0; u < U; ++u) {
        const QueryState<T>& q_state = state[static_cast<size_t>(u)];
        if (!q_state.in_tile) continue;
        for (int64_t d = 0; d < HSp; ++d) acc[u * HSp + d] = q_state.alpha * acc[u * HSp + d] + pv[u * HSp + d];
      }
    }
    for (int64_t u = 0; u < U; ++u) {
      const QueryState<T>& q_state = state[static_cast<size_t>(u)];
      const int64_t h = g * group() + u / Tq, i = u % Tq;
      lse[(b * s.NH + h) * Tq + i] = q_state.m + std::log(q_state.l);
      const T inv_l = T(1) / q_state.l;
      T* o = out.row(b, h, i);
      for (int64_t d = 0; d < HS; ++d) o[d] = acc[u * HSp + d] * inv_l;
    }
  }
};

}  // namespace

template <class T>
void attention_decode_forward(HeadsView<T> out, T* lse, HeadsView<const T> q, HeadsView<const T> k,
                              HeadsView<const T> v, const AttentionShape& s) {
  const DecodeTask<T> task{out, lse, q, k, v, s, round_up(s.HS, kColAlign)};
  parallel_for(0, s.B * s.NKV, kGrain, [&](int64_t begin, int64_t end) {
    const typename DecodeTask<T>::Buffers buf(task.scratch_sizes());
    std::vector<QueryState<T>> state(static_cast<size_t>(task.states()));
    for (int64_t bg = begin; bg < end; ++bg) task.run(bg / s.NKV, bg % s.NKV, buf, state);
  });
}

template void attention_decode_forward<float>(HeadsView<float>, float*, HeadsView<const float>,
                                              HeadsView<const float>, HeadsView<const float>, const AttentionShape&);
template void attention_decode_forward<double>(HeadsView<double>, double*, HeadsView<const double>,
                                               HeadsView<const double>, HeadsView<const double>, const AttentionShape&);

}  // namespace trident::kernels::cpu
