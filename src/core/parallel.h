// Threading: one setting for the whole process, used by OpenMP regions and by OpenBLAS
// (its OpenMP flavour follows omp_get_max_threads()).
//
// Note [Deterministic parallelism]
// Results must not depend on the thread count for deterministic ops. So work is split into
// chunks whose boundaries depend only on the problem size (parallel_for's grain), never on
// the number of threads, and partial results are combined in chunk order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include <omp.h>

namespace trident {

void set_num_threads(int n);
int num_threads();

// Calls fn(begin, end) on disjoint chunks of [begin, end) of at least `grain` items,
// in parallel when there is more than one chunk and we are not already in a parallel region.
template <class Fn>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const Fn& fn) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks = (n + grain - 1) / grain;
  if (chunks == 1 || omp_in_parallel() || num_threads() == 1) {
    fn(begin, end);
    return;
  }
  // Split into as many near-equal chunks as threads, but never smaller than grain.
  const int64_t parts = std::min<int64_t>(chunks, num_threads());
#pragma omp parallel for num_threads(static_cast<int>(parts)) schedule(static, 1)
  for (int64_t p = 0; p < parts; ++p) {
    const int64_t b = begin + n * p / parts, e = begin + n * (p + 1) / parts;
    if (b < e) fn(b, e);
  }
}

// Deterministic chunked reduction: fn(begin, end) returns the partial for one chunk of
// exactly `chunk` items (the last may be shorter); partials are combined left to right.
template <class Acc, class Fn>
Acc parallel_reduce(int64_t n, int64_t chunk, Acc init, const Fn& fn) {
  if (n <= 0) return init;
  const int64_t chunks = (n + chunk - 1) / chunk;
  std::vector<Acc> partial(static_cast<size_t>(chunks));
  parallel_for(0, chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) partial[c] = fn(c * chunk, std::min(n, (c + 1) * chunk));
  });
  Acc acc = init;
  for (const Acc& p : partial) acc += p;
  return acc;
}
}  // namespace trident
