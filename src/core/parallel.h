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
#include <exception>
#include <vector>

#include <omp.h>

namespace trident {

void set_num_threads(int n);
int num_threads();

// Note [Denormals]
// Why flush denormals? Subnormal floats (below 1.2e-38) take a slow microcode path on x86:
// attention forward+backward with peaky scores (q scaled by 40, so the softmax underflows into
// subnormals) ran 2.5x slower than with flushing in a measurement here (27 ms vs 11-13 ms).
// Values that small do not matter to training, so the trainer turns on flush-to-zero /
// denormals-are-zero
// (train.flush_denormals). The library's default stays IEEE: tests and references see exact
// subnormal arithmetic unless a caller opts in. The mode is per thread in hardware, so it is
// applied to the calling thread and, on entry, to every parallel_for worker.
void set_flush_denormals(bool on);
bool flush_denormals();
// Applies the process-wide denormal mode to the current thread (cheap when already applied).
void apply_denormal_mode();

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
  // An exception may not leave an OpenMP region (std::terminate): the first one thrown is
  // kept and rethrown on the calling thread once every chunk has finished.
  std::exception_ptr error;
#pragma omp parallel for num_threads(static_cast<int>(parts)) schedule(static, 1)
  for (int64_t p = 0; p < parts; ++p) {
    try {
      apply_denormal_mode();
      const int64_t b = begin + n * p / parts, e = begin + n * (p + 1) / parts;
      if (b < e) fn(b, e);
    } catch (...) {
#pragma omp critical(trident_parallel_for_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
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
