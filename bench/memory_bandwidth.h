// The machine's memory read bandwidth as a decode step sees it: every thread streams its share
// of a buffer far larger than the caches (reading and summing floats, vectorized), the best
// of a few passes. Decoding a token reads every weight once, so this is its ceiling
// (issue #49: batch-1 decode at >= 70% of it). Measured in the benchmark's own process, with
// its threads, next to what it compares.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "core/parallel.h"

namespace trident::bench {

inline double memory_read_gb_per_s(int64_t bytes = int64_t{1} << 30, int passes = 5) {
  const int64_t n = bytes / static_cast<int64_t>(sizeof(float));
  std::vector<float> buffer(static_cast<size_t>(n));
  const int64_t grain = int64_t{1} << 20;
  parallel_for(0, n, grain, [&](int64_t b, int64_t e) { std::fill(buffer.data() + b, buffer.data() + e, 1.0f); });
  double best = 0.0;
  volatile float sink = 0.0f;
  for (int p = 0; p < passes; ++p) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<float> partial(static_cast<size_t>((n + grain - 1) / grain), 0.0f);
    parallel_for(0, n, grain, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; c += grain) {
        float lanes[16] = {};
        const int64_t end = std::min(c + grain, e);
        for (int64_t i = c; i + 16 <= end; i += 16)
#pragma omp simd
          for (int l = 0; l < 16; ++l) lanes[l] += buffer[static_cast<size_t>(i + l)];
        float s = 0.0f;
        for (float l : lanes) s += l;
        partial[static_cast<size_t>(c / grain)] = s;
      }
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (float s : partial) sink = sink + s;
    best = std::max(best, static_cast<double>(n) * sizeof(float) / seconds / 1e9);
  }
  return best;
}

}  // namespace trident::bench
