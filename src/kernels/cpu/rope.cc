// RoPE kernel (see rope.h): one cos/sin table for the call's positions (pos0 + t; 0 up to the
// largest of `positions`, or each token's own where that is fewer rows), then every (token, head)
// row rotated independently, so results do not depend on the thread count.
#include "kernels/cpu/rope.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/parallel.h"

namespace trident::kernels::cpu {
namespace {

// Note [RoPE's table per thread]
// Training calls RoPE with the same positions over and over (each block's q and k, forward and
// backward), and the table's cos and sin in double were most of a call at small widths: 0.3 ms
// of 0.35 at T = 256, D = 64 on a Zen 4 core, 128 calls a step of tiny-moe at b1 m8 (the
// planner's per-micro-batch miss). So each calling thread keeps the last table it made, for
// the positions pos0 .. pos0 + rows, and reuses it while a call needs no more rows of it with
// the same frequencies (forward and backward alike: the inverse negates sin where it is used,
// which is exact); the values are the same bits either way. A decode step's table by token is
// made fresh.
template <class Acc>
struct RopeTable {
  int64_t rows = -1, D = 0, pos0 = 0;
  RopeParams params;
  std::vector<Acc> cos, sin;
  bool serves(int64_t r, int64_t d, int64_t p0, const RopeParams& p) const {
    return rows >= r && D == d && pos0 == p0 && params.theta == p.theta && params.factor == p.factor &&
           params.low_freq_factor == p.low_freq_factor && params.high_freq_factor == p.high_freq_factor &&
           params.original_max_position == p.original_max_position;
  }
};

// Rows u < table_rows of position (by_token ? positions[u] : pos0 + u), i < D/2: cos and sin
// (the inverse rotation negates sin where it is used, so one table serves both directions).
template <class Acc>
void fill_table(std::vector<Acc>& cos_table, std::vector<Acc>& sin_table, int64_t table_rows, int64_t D,
                const RopeParams& params, int64_t pos0, const int64_t* positions, bool by_token) {
  const int64_t half = D / 2;
  cos_table.resize(static_cast<size_t>(table_rows * half));
  sin_table.resize(cos_table.size());
  parallel_for(0, table_rows, 16, [&](int64_t tb, int64_t te) {
    for (int64_t t = tb; t < te; ++t) {
      const int64_t p = by_token ? positions[t] : pos0 + t;
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(p) * rope_inv_freq(params, i, D);
        cos_table[t * half + i] = static_cast<Acc>(std::cos(angle));
        sin_table[t * half + i] = static_cast<Acc>(std::sin(angle));
      }
    }
  });
}

}  // namespace

template <class T>
void rope(T* out, const T* x, int64_t B, int64_t T_len, int64_t H, int64_t D,
          const RopeParams& params, int64_t pos0, const int64_t* positions, bool inverse) {
  using Acc = acc_t<T>;
  const int64_t half = D / 2;
  // Table row u holds position pos0 + u (positions null), u (positions given, the table indexed
  // by position), or positions[u] (the table indexed by token: when the tokens are fewer than
  // the positions up to the largest, as at decode, where a few tokens sit at positions in the
  // thousands and a table of every position would cost most of the call). The same angle per
  // position either way, so the same bits.
  int64_t table_rows = T_len;
  bool by_token = false;
  if (positions != nullptr) {
    table_rows = 0;
    for (int64_t r = 0; r < B * T_len; ++r) table_rows = std::max(table_rows, positions[r] + 1);
    pos0 = 0;
    if (table_rows > B * T_len) {
      by_token = true;
      table_rows = B * T_len;
    }
  }
  // cos and sin for (u, i), u < table_rows, i < D/2 (Note [RoPE's table per thread]).
  thread_local RopeTable<Acc> cached;
  std::vector<Acc> fresh_cos, fresh_sin;
  const std::vector<Acc>* cos_ptr = &fresh_cos;
  const std::vector<Acc>* sin_ptr = &fresh_sin;
  if (by_token) {
    fill_table(fresh_cos, fresh_sin, table_rows, D, params, pos0, positions, true);
  } else {
    if (!cached.serves(table_rows, D, pos0, params)) {
      fill_table(cached.cos, cached.sin, table_rows, D, params, pos0, nullptr, false);
      cached.rows = table_rows;
      cached.D = D;
      cached.pos0 = pos0;
      cached.params = params;
    }
    cos_ptr = &cached.cos;
    sin_ptr = &cached.sin;
  }
  const std::vector<Acc>& cos_table = *cos_ptr;
  const std::vector<Acc>& sin_table = *sin_ptr;
  const int64_t rows = B * T_len * H;
  parallel_for(0, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(D, 1)),
               [&](int64_t rb, int64_t re) {
                 for (int64_t r = rb; r < re; ++r) {
                   const int64_t t = by_token               ? r / H
                                     : positions != nullptr ? positions[r / H]
                                                            : (r / H) % T_len;
                   const Acc* c = cos_table.data() + t * half;
                   const Acc* s = sin_table.data() + t * half;
                   const T* xr = x + r * D;
                   T* o = out + r * D;
                   for (int64_t i = 0; i < half; ++i) {
                     const Acc a = static_cast<Acc>(xr[i]), b = static_cast<Acc>(xr[i + half]);
                     const Acc si = inverse ? -s[i] : s[i];
                     o[i] = static_cast<T>(a * c[i] - b * si);
                     o[i + half] = static_cast<T>(b * c[i] + a * si);
                   }
                 }
               });
}

#define TRI_INSTANTIATE_ROPE(T)                                                              \
  template void rope<T>(T*, const T*, int64_t, int64_t, int64_t, int64_t, const RopeParams&, \
                        int64_t, const int64_t*, bool);
TRI_FOR_EACH_FLOATING_TYPE(TRI_INSTANTIATE_ROPE)
#undef TRI_INSTANTIATE_ROPE

}  // namespace trident::kernels::cpu
