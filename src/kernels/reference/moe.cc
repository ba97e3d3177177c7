#include "kernels/reference/moe.h"

#include "core/check.h"

namespace trident::reference {

Array grouped_linear(const Array& x, const std::vector<Array>& ws, const std::vector<int64_t>& offsets) {
  TRI_CHECK(x.dim() == 2 && !ws.empty() && offsets.size() == ws.size() + 1 && offsets.back() == x.shape[0],
            "reference grouped_linear: x ", x.shape, ", ", ws.size(), " weights, ", offsets.size(), " offsets");
  const int64_t in = x.shape[1], out = ws[0].shape[0];
  Array y({x.shape[0], out});
  for (size_t e = 0; e < ws.size(); ++e) {
    TRI_CHECK(ws[e].dim() == 2 && ws[e].shape[0] == out && ws[e].shape[1] == in, "reference grouped_linear: weight ",
              e, " is ", ws[e].shape);
    for (int64_t m = offsets[e]; m < offsets[e + 1]; ++m)
      for (int64_t o = 0; o < out; ++o) {
        double acc = 0.0;
        for (int64_t i = 0; i < in; ++i) acc += x[m * in + i] * ws[e][o * in + i];
        y[m * out + o] = acc;
      }
  }
  return y;
}

Array scatter_add_rows(const Array& src, const Array& index, int64_t rows) {
  TRI_CHECK(src.dim() == 2 && index.numel() == src.shape[0], "reference scatter_add_rows: src ", src.shape,
            ", index ", index.shape);
  const int64_t C = src.shape[1];
  Array out({rows, C});
  for (int64_t m = 0; m < index.numel(); ++m) {
    const int64_t r = static_cast<int64_t>(index[m]);
    TRI_CHECK(r >= 0 && r < rows, "reference scatter_add_rows: index ", index[m], " at ", m, " is not in [0, ", rows,
              ")");
    for (int64_t c = 0; c < C; ++c) out[r * C + c] += src[m * C + c];
  }
  return out;
}

}  // namespace trident::reference
