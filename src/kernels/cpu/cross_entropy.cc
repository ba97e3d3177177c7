// Fused log-softmax + cross-entropy kernels (see cross_entropy.h). Rows are independent;
// the forward's row losses are summed in fixed chunks of rows (parallel_reduce). Row maxima
// and sums are lane reductions (Note [Lane sums] in row_reduce.h), exponentials math::exp
// (Note [Vectorizable float math] in fast_math.h).
#include "kernels/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/dtype.h"
#include "core/parallel.h"
#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/row_reduce.h"

namespace trident::kernels::cpu {
namespace {

// Rows per parallel chunk (and per partial sum of the loss): depends on V only.
int64_t row_grain(int64_t V) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(V, 1));
}

// Elements per step of the online logsumexp: small enough to stay in L1 between the max and
// the exponential passes over it.
constexpr int64_t kChunk = 2048;

// logsumexp of one row, reading it from memory once: per chunk, the chunk's max, a rescale of
// the running sum if the max grew, then the chunk's exponentials.
template <class T>
acc_t<T> row_logsumexp(const T* row, int64_t V) {
  using Acc = acc_t<T>;
  Acc max = -std::numeric_limits<Acc>::infinity(), sum = 0;
  for (int64_t c0 = 0; c0 < V; c0 += kChunk) {
    const int64_t n = std::min(kChunk, V - c0);
    const T* p = row + c0;
    const Acc chunk_max = lane_max<Acc>(n, [p](int64_t j) { return static_cast<Acc>(p[j]); });
    if (chunk_max > max) {
      sum *= math::exp(max - chunk_max);
      max = chunk_max;
    }
    const Acc m = max;
    sum += lane_sum<Acc>(n, [p, m](int64_t j) { return math::exp(static_cast<Acc>(p[j]) - m); });
  }
  return max + std::log(sum);
}

}  // namespace

template <class T, class I>
double cross_entropy_forward(acc_t<T>* logsumexp, const T* logits, const I* targets, int64_t N,
                             int64_t V, int64_t ignore_index) {
  using Acc = acc_t<T>;
  return parallel_reduce<double>(N, row_grain(V), 0.0, [&](int64_t rb, int64_t re) {
    double loss = 0.0;
    for (int64_t r = rb; r < re; ++r) {
      const int64_t target = static_cast<int64_t>(targets[r]);
      if (target == ignore_index) {
        logsumexp[r] = 0;
        continue;
      }
      const T* row = logits + r * V;
      const Acc lse = row_logsumexp(row, V);
      logsumexp[r] = lse;
      loss += static_cast<double>(lse - static_cast<Acc>(row[target]));
    }
    return loss;
  });
}

template <class T, class I>
void cross_entropy_backward(T* dlogits, const T* logits, const acc_t<T>* logsumexp,
                            const I* targets, int64_t N, int64_t V, int64_t ignore_index,
                            double scale) {
  using Acc = acc_t<T>;
  const Acc s = static_cast<Acc>(scale);
  parallel_for(0, N, row_grain(V), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      T* d = dlogits + r * V;
      const int64_t target = static_cast<int64_t>(targets[r]);
      if (target == ignore_index) {
        std::fill(d, d + V, static_cast<T>(0.0));
        continue;
      }
      const T* row = logits + r * V;
      const Acc lse = logsumexp[r];
      // Read before the row is written: dlogits may be logits itself.
      const Acc target_logit = static_cast<Acc>(row[target]);
      for (int64_t j = 0; j < V; ++j)
        d[j] = static_cast<T>(math::exp(static_cast<Acc>(row[j]) - lse) * s);
      // The target's entry, recomputed rather than corrected so it is rounded only once.
      d[target] = static_cast<T>((math::exp(target_logit - lse) - Acc(1)) * s);
    }
  });
}

#define TRI_INSTANTIATE_CROSS_ENTROPY(T, I)                                                    \
  template double cross_entropy_forward<T, I>(acc_t<T>*, const T*, const I*, int64_t, int64_t, \
                                              int64_t);                                        \
  template void cross_entropy_backward<T, I>(T*, const T*, const acc_t<T>*, const I*, int64_t, \
                                             int64_t, int64_t, double);
#define TRI_INSTANTIATE_CROSS_ENTROPY_ALL_INDICES(T) \
  TRI_INSTANTIATE_CROSS_ENTROPY(T, int32_t)          \
  TRI_INSTANTIATE_CROSS_ENTROPY(T, int64_t)          \
  TRI_INSTANTIATE_CROSS_ENTROPY(T, uint16_t)
TRI_FOR_EACH_FLOATING_TYPE(TRI_INSTANTIATE_CROSS_ENTROPY_ALL_INDICES)
#undef TRI_INSTANTIATE_CROSS_ENTROPY_ALL_INDICES
#undef TRI_INSTANTIATE_CROSS_ENTROPY

}  // namespace trident::kernels::cpu
