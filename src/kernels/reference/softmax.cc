#include "kernels/reference/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace trident::reference {
namespace {

// x viewed as (outer, n, inner) with `dim` the middle axis; each (outer, inner) pair is one
// slice of n values, `inner` apart.
Array softmax_impl(const Array& x, int64_t dim, bool take_log) {
  const int d = normalize_dim(dim, x.dim(), "reference softmax");
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < d; ++i) outer *= x.shape[i];
  for (int i = d + 1; i < x.dim(); ++i) inner *= x.shape[i];
  const int64_t n = x.dim() == 0 ? 1 : x.shape[d];
  Array out(x.shape);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * n * inner + i;
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < n; ++k) m = std::max(m, x[base + k * inner]);
      double s = 0.0;
      for (int64_t k = 0; k < n; ++k) s += std::exp(x[base + k * inner] - m);
      for (int64_t k = 0; k < n; ++k) {
        const double v = x[base + k * inner];
        out[base + k * inner] = take_log ? v - m - std::log(s) : std::exp(v - m) / s;
      }
    }
  }
  return out;
}

}  // namespace

Array softmax(const Array& x, int64_t dim) {
  return softmax_impl(x, dim, false);
}
Array log_softmax(const Array& x, int64_t dim) {
  return softmax_impl(x, dim, true);
}

}  // namespace trident::reference
