// Reference layernorm and rmsnorm (see norm.h): one row at a time, in float64.
#include "kernels/reference/norm.h"

#include <cmath>

namespace trident::reference {

Array layernorm(const Array& x, const std::optional<Array>& weight,
                const std::optional<Array>& bias, double eps) {
  const int64_t C = x.shape.back(), rows = x.numel() / C;
  Array out(x.shape);
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = x.data.data() + r * C;
    double mean = 0.0;
    for (int64_t j = 0; j < C; ++j) mean += row[j];
    mean /= static_cast<double>(C);
    double var = 0.0;
    for (int64_t j = 0; j < C; ++j) var += (row[j] - mean) * (row[j] - mean);
    var /= static_cast<double>(C);
    const double rstd = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < C; ++j) {
      const double w = weight ? (*weight)[j] : 1.0, b = bias ? (*bias)[j] : 0.0;
      out[r * C + j] = (row[j] - mean) * rstd * w + b;
    }
  }
  return out;
}

Array rmsnorm(const Array& x, const std::optional<Array>& weight, double eps) {
  const int64_t C = x.shape.back(), rows = x.numel() / C;
  Array out(x.shape);
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = x.data.data() + r * C;
    double mean_square = 0.0;
    for (int64_t j = 0; j < C; ++j) mean_square += row[j] * row[j];
    mean_square /= static_cast<double>(C);
    const double rstd = 1.0 / std::sqrt(mean_square + eps);
    for (int64_t j = 0; j < C; ++j) out[r * C + j] = row[j] * rstd * (weight ? (*weight)[j] : 1.0);
  }
  return out;
}

}  // namespace trident::reference
