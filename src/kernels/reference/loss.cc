// Reference cross-entropy (see loss.h): logsumexp per row, in float64.
#include "kernels/reference/loss.h"

#include <algorithm>
#include <cmath>

namespace trident::reference {

Array cross_entropy(const Array& logits, const Array& targets, int64_t ignore_index, bool mean) {
  const int64_t V = logits.shape.back(), rows = logits.numel() / V;
  double total = 0.0;
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t target = static_cast<int64_t>(targets[r]);
    if (target == ignore_index) continue;
    const double* row = logits.data.data() + r * V;
    const double max = *std::max_element(row, row + V);
    double sum_exp = 0.0;
    for (int64_t j = 0; j < V; ++j) sum_exp += std::exp(row[j] - max);
    total += max + std::log(sum_exp) - row[target];
    ++count;
  }
  return Array(Shape{}, {mean ? total / static_cast<double>(count) : total});
}

}  // namespace trident::reference
