// Gradient buckets shared by data parallelism and ZeRO: parameters grouped in reverse
// registration order (roughly the order backward finishes them), consecutive ones together
// up to `limit` elements per bucket; a parameter larger than the limit gets its own.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace trident::parallel {

// By element counts (the planner groups parameters it has not built the same way).
inline std::vector<std::vector<size_t>> group_in_buckets(const std::vector<int64_t>& numels, int64_t limit) {
  std::vector<std::vector<size_t>> groups;
  int64_t filled = 0;
  for (size_t k = numels.size(); k-- > 0;) {
    const int64_t n = numels[k];
    if (groups.empty() || (filled > 0 && filled + n > limit)) {
      groups.emplace_back();
      filled = 0;
    }
    groups.back().push_back(k);
    filled += n;
  }
  return groups;
}

inline std::vector<std::vector<size_t>> group_in_buckets(const std::vector<Tensor>& params, int64_t limit) {
  std::vector<int64_t> numels;
  for (const Tensor& p : params) numels.push_back(p.numel());
  return group_in_buckets(numels, limit);
}

}  // namespace trident::parallel
