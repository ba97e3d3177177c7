// Fixed-order vectorizable reductions along a row: lane_sum and lane_max of n terms term(j),
// j in [0, n), for the row kernels (layernorm, rmsnorm, softmax, cross_entropy).
// The result depends only on n and the terms: never on threads, alignment or the CPU's
// vector width. Internal to kernels/cpu.
// Not here: sums over rows (parameter gradients: kernels/cpu/row_blocks.h), reductions of
// strided tensors over several dims (kernels/cpu/reduce.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

namespace trident::kernels::cpu {

// Note [Lane sums]
// A row sum written as `s += x[j]` is a loop-carried dependency, which g++ will not
// vectorize without -ffast-math: that would reassociate floating-point additions and change
// the rounding. Summing into kReductionLanes independent accumulators (lane k takes the
// elements j with j % kReductionLanes == k) and adding the lanes in order at the end is one
// fixed order that compiles to kReductionLanes-wide vector adds. The order depends only on
// the row length, never on threads or alignment, so results are the same on every thread
// count; and the partial sums also make the rounding error grow more slowly with n.
// lane_max uses the same lanes (a maximum is exact, so only its handling of NaN depends on
// the order: NaN terms are skipped).
inline constexpr int kReductionLanes = 16;

// sum over j in [0, n) of term(j), as Acc, in the order of Note [Lane sums].
template <class Acc, class Term>
inline Acc lane_sum(int64_t n, const Term& term) {
  constexpr int kLanes = kReductionLanes;
  Acc lane[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int k = 0; k < kLanes; ++k) lane[k] += term(j + k);
  for (int k = 0; j + k < n; ++k) lane[k] += term(j + k);
  Acc sum = 0;
  for (int k = 0; k < kLanes; ++k) sum += lane[k];
  return sum;
}

// max over j in [0, n) of term(j), as Acc, in lanes like lane_sum; -inf when n == 0. NaN
// terms are skipped (a softmax still turns a NaN input into NaN through its sum of
// exponentials).
template <class Acc, class Term>
inline Acc lane_max(int64_t n, const Term& term) {
  constexpr int kLanes = kReductionLanes;
  Acc lane[kLanes];
  std::fill(lane, lane + kLanes, -std::numeric_limits<Acc>::infinity());
  int64_t j = 0;
  // The lanes are independent (omp simd); without saying so GCC unrolls the inner loop
  // before vectorizing and then fails to turn the 16 scalar maxima into vector ones.
  for (; j + kLanes <= n; j += kLanes) {
#pragma omp simd
    for (int k = 0; k < kLanes; ++k) {
      const Acc v = term(j + k);
      lane[k] = v > lane[k] ? v : lane[k];
    }
  }
  for (int k = 0; j + k < n; ++k) {
    const Acc v = term(j + k);
    lane[k] = v > lane[k] ? v : lane[k];
  }
  Acc m = lane[0];
  for (int k = 1; k < kLanes; ++k) m = lane[k] > m ? lane[k] : m;
  return m;
}

}  // namespace trident::kernels::cpu
