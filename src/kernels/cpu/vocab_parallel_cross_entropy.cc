#include "kernels/cpu/vocab_parallel_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/parallel.h"
#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/row_reduce.h"

namespace trident::kernels::cpu {
namespace {

// Rows per parallel_for chunk: about 64k logits each.
int64_t row_grain(int64_t V) { return std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(V, 1)); }

}  // namespace

void vocab_parallel_row_max(float* row_max, const float* logits, int64_t N, int64_t V) {
  parallel_for(0, N, row_grain(V), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float* row = logits + i * V;
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < V; ++j) m = std::max(m, row[j]);
      row_max[i] = m;
    }
  });
}

void vocab_parallel_sums(double* sums, const float* logits, const float* row_max, const int64_t* targets, int64_t N,
                         int64_t V, int64_t begin) {
  parallel_for(0, N, row_grain(V), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float* row = logits + i * V;
      const float m = row_max[i];
      sums[i] = lane_sum<double>(V, [row, m](int64_t j) { return static_cast<double>(math::exp(row[j] - m)); });
      const int64_t t = targets[i] - begin;
      sums[N + i] = t >= 0 && t < V ? static_cast<double>(row[t] - m) : 0.0;
    }
  });
}

void vocab_parallel_backward(float* grad, const float* logits, const float* row_max, const double* sums,
                             const int64_t* targets, int64_t N, int64_t V, int64_t begin, int64_t ignore_index,
                             double scale) {
  parallel_for(0, N, row_grain(V), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float* g = grad + i * V;
      if (targets[i] == ignore_index) {
        std::fill(g, g + V, 0.0f);
        continue;
      }
      const float* row = logits + i * V;
      const int64_t t = targets[i] - begin;
      // e^(l - max) / sum = e^(l - lse), the local cross_entropy_backward's form: one exp per logit.
      const float lse = row_max[i] + static_cast<float>(std::log(sums[i]));
      const float sc = static_cast<float>(scale);
      for (int64_t j = 0; j < V; ++j) g[j] = math::exp(row[j] - lse) * sc;
      // The target's entry, recomputed rather than corrected so it is rounded only once.
      if (t >= 0 && t < V) g[t] = (math::exp(row[t] - lse) - 1.0f) * sc;
    }
  });
}

}  // namespace trident::kernels::cpu
