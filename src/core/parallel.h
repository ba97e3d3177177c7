// Threading: one setting for the whole process, used by OpenMP regions and by OpenBLAS
// (its OpenMP flavour follows omp_get_max_threads()).
//
// Note [Deterministic parallelism]
// Results must not depend on the thread count for deterministic ops. So work is split into
// chunks whose boundaries depend only on the problem size (parallel_for's grain), never on
// the number of threads, and partial results are combined in chunk order.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <vector>

#include <omp.h>

namespace trident {

void set_num_threads(int n);
int num_threads();
// The CPUs this process may run on (its affinity mask; mpirun binds each rank to one core by
// default); 0 where that cannot be read.
int cpus_available();

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

namespace detail {
// The chunks of `grain` items (made at least 1) in [begin, end); or 0 after running fn on the
// whole range on the calling thread (one chunk, already in a parallel region, or one thread),
// or for an empty range.
template <class Fn>
int64_t chunks_or_run_inline(int64_t begin, int64_t end, int64_t& grain, const Fn& fn) {
  const int64_t n = end - begin;
  if (n <= 0) return 0;
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks = (n + grain - 1) / grain;
  if (chunks == 1 || omp_in_parallel() || num_threads() == 1) {
    fn(begin, end);
    return 0;
  }
  return chunks;
}
}  // namespace detail

// Calls fn(begin, end) on disjoint chunks of [begin, end) of at least `grain` items,
// in parallel when there is more than one chunk and we are not already in a parallel region.
template <class Fn>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const Fn& fn) {
  const int64_t n = end - begin, chunks = detail::chunks_or_run_inline(begin, end, grain, fn);
  if (chunks == 0) return;
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

// Like parallel_for, but chunks of `grain` items are handed out one at a time as threads ask:
// for work whose chunks take unequal time, or threads that run at unequal speed (a VM's vCPUs
// do; a static split then leaves one thread waiting at the end). Which thread runs a chunk
// varies from run to run, so fn's result must not depend on it; per-thread scratch is indexed
// by omp_get_thread_num(), which is below num_threads().
template <class Fn>
void parallel_for_dynamic(int64_t begin, int64_t end, int64_t grain, const Fn& fn) {
  const int64_t chunks = detail::chunks_or_run_inline(begin, end, grain, fn);
  if (chunks == 0) return;
  std::exception_ptr error;
  std::atomic<int64_t> next{0};
#pragma omp parallel num_threads(static_cast<int>(std::min<int64_t>(chunks, num_threads())))
  {
    try {
      apply_denormal_mode();
      for (int64_t c = next.fetch_add(1, std::memory_order_relaxed); c < chunks;
           c = next.fetch_add(1, std::memory_order_relaxed))
        fn(begin + c * grain, std::min(end, begin + (c + 1) * grain));
    } catch (...) {
#pragma omp critical(trident_parallel_for_error)
      if (!error) error = std::current_exception();
      next.store(chunks, std::memory_order_relaxed);  // the others stop after their chunk
    }
  }
  if (error) std::rethrow_exception(error);
}

// fn(o, j0, j1) over rows o < outer of `inner` items, each row cut into near-equal pieces of at
// most `max_piece` items, the pieces spread over the threads: elementwise loops over tensors
// whose dimensions coalesce into one long row (a residual add of two contiguous activations)
// still run on every thread, where a split by rows alone ran on one.
template <class Fn>
void parallel_for_row_pieces(int64_t outer, int64_t inner, int64_t max_piece, const Fn& fn) {
  if (outer <= 0 || inner <= 0) return;
  const int64_t per_row = (inner + max_piece - 1) / max_piece, piece = (inner + per_row - 1) / per_row;
  parallel_for(0, outer * per_row, std::max<int64_t>(1, max_piece / piece), [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p) {
      const int64_t j0 = p % per_row * piece;
      fn(p / per_row, j0, std::min(inner, j0 + piece));
    }
  });
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
