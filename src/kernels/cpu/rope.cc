// RoPE kernel (see rope.h): one cos/sin table for the call's positions (pos0 + t; 0 up to the
// largest of `positions`, or each token's own where that is fewer rows), then every (token, head)
// row rotated independently, so results do not depend on the thread count.
#include "kernels/cpu/rope.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/parallel.h"

namespace trident::kernels::cpu {

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
  // cos and sin for (u, i), u < table_rows, i < D/2.
  std::vector<Acc> cos_table(static_cast<size_t>(table_rows * half)), sin_table(cos_table.size());
  parallel_for(0, table_rows, 16, [&](int64_t tb, int64_t te) {
    for (int64_t t = tb; t < te; ++t) {
      const int64_t p = by_token ? positions[t] : pos0 + t;
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(p) * rope_inv_freq(params, i, D);
        cos_table[t * half + i] = static_cast<Acc>(std::cos(angle));
        sin_table[t * half + i] = static_cast<Acc>(inverse ? -std::sin(angle) : std::sin(angle));
      }
    }
  });
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
                     o[i] = static_cast<T>(a * c[i] - b * s[i]);
                     o[i + half] = static_cast<T>(b * c[i] + a * s[i]);
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
