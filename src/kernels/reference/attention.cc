// The naive float64 attention oracle (see attention.h): full score matrix per head.
#include "kernels/reference/attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/check.h"

namespace trident::reference {

Array attention(const Array& q, const Array& k, const Array& v, bool causal,
                std::optional<double> scale, int64_t window, const std::vector<int64_t>& positions) {
  TRI_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && k.shape == v.shape,
            "reference attention: expected q (B,NH,T,HS) and k, v (B,NKV,T,HS), got ", q.shape,
            ", ", k.shape, ", ", v.shape);
  const int64_t B = q.shape[0], NH = q.shape[1], T = q.shape[2], HS = q.shape[3];
  const int64_t NKV = k.shape[1];
  TRI_CHECK(NKV > 0 && NH % NKV == 0, "reference attention: NKV=", NKV, " must divide NH=", NH);
  const int64_t group = NH / NKV;
  const double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(HS));
  const double minus_inf = -std::numeric_limits<double>::infinity();

  Array out(q.shape);
  std::vector<double> scores(static_cast<size_t>(T * T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h) {
      const int64_t g = h / group;
      const double* qh = &q.data[static_cast<size_t>(((b * NH + h) * T) * HS)];
      const double* kh = &k.data[static_cast<size_t>(((b * NKV + g) * T) * HS)];
      const double* vh = &v.data[static_cast<size_t>(((b * NKV + g) * T) * HS)];
      double* oh = &out.data[static_cast<size_t>(((b * NH + h) * T) * HS)];
      // The full score matrix of this head, masked.
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          double dot = 0.0;
          for (int64_t d = 0; d < HS; ++d) dot += qh[i * HS + d] * kh[j * HS + d];
          bool masked = (causal && j > i) || (window > 0 && j <= i - window);
          for (int64_t u = j + 1; !positions.empty() && u <= i; ++u)
            masked = masked || positions[static_cast<size_t>(b * T + u)] == 0;
          scores[static_cast<size_t>(i * T + j)] = masked ? minus_inf : s * dot;
        }
      // Row softmax, then P @ V.
      for (int64_t i = 0; i < T; ++i) {
        double* row = &scores[static_cast<size_t>(i * T)];
        double max = minus_inf;
        for (int64_t j = 0; j < T; ++j) max = std::max(max, row[j]);
        double sum = 0.0;
        for (int64_t j = 0; j < T; ++j) {
          row[j] = std::exp(row[j] - max);
          sum += row[j];
        }
        for (int64_t d = 0; d < HS; ++d) {
          double acc = 0.0;
          for (int64_t j = 0; j < T; ++j) acc += row[j] * vh[j * HS + d];
          oh[i * HS + d] = acc / sum;
        }
      }
    }
  return out;
}

}  // namespace trident::reference
