#include "planner/zero_buckets.h"

#include <algorithm>

#include "parallel/buckets.h"

namespace trident::planner {

ZeroBuckets zero_buckets(const std::vector<int64_t>& numels, const std::vector<int64_t>& where,
                         const std::vector<bool>& expert, const Layout& l, int64_t layers, int64_t bucket_bytes) {
  ZeroBuckets z;
  std::vector<std::vector<size_t>> in_group(1);
  z.ranks.push_back(l.data_parallel());
  for (size_t k = 0; k < numels.size(); ++k) {
    if (expert[k] && z.ranks.size() == 1) {
      z.ranks.push_back(l.dp);
      in_group.emplace_back();
    }
    in_group[expert[k] ? 1 : 0].push_back(k);
  }
  for (size_t g = 0; g < in_group.size(); ++g) {
    const std::vector<size_t>& members = in_group[g];
    std::vector<std::vector<size_t>> buckets;
    if (l.zero_stage == 3) {
      buckets.assign(static_cast<size_t>(layers) + 1, {});
      for (size_t k : members) buckets[where[k] >= 0 ? static_cast<size_t>(where[k]) + 1 : 0].push_back(k);
    } else {
      std::vector<int64_t> sizes;
      for (size_t k : members) sizes.push_back(numels[k]);
      for (const std::vector<size_t>& b : parallel::group_in_buckets(sizes, std::max<int64_t>(1, bucket_bytes / 4))) {
        buckets.emplace_back();
        for (size_t j : b) buckets.back().push_back(members[j]);
      }
    }
    for (std::vector<size_t>& b : buckets) {
      int64_t n = 0;
      for (size_t k : b) n += numels[k];
      const int64_t ranks = z.ranks[g];
      z.padded.push_back((n + ranks - 1) / ranks * ranks);
      z.flat += z.padded.back();
      z.shard += z.padded.back() / ranks;
      z.members.push_back(std::move(b));
      z.owner.push_back(g);
    }
  }
  return z;
}

std::vector<std::pair<int64_t, int64_t>> shard_segments(const ZeroBuckets& z, const std::vector<int64_t>& numels,
                                                        size_t group, int64_t rank) {
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t at = 0;  // the bucket's shard in the concatenated shards
  for (size_t j = 0; j < z.members.size(); ++j) {
    if (z.owner[j] != group) continue;
    const int64_t len = z.padded[j] / z.ranks[group], s0 = rank * len, s1 = s0 + len;
    int64_t p0 = 0;  // the parameter in the bucket's flat buffer
    for (size_t k : z.members[j]) {
      const int64_t p1 = p0 + numels[k];
      const int64_t lo = std::max(s0, p0), hi = std::min(s1, p1);
      if (lo < hi) out.emplace_back(at + lo - s0, at + hi - s0);
      p0 = p1;
    }
    at += len;
  }
  return out;
}

int64_t group_shard(const ZeroBuckets& z, size_t group) {
  int64_t n = 0;
  for (size_t j = 0; j < z.members.size(); ++j)
    if (z.owner[j] == group) n += z.padded[j] / z.ranks[group];
  return n;
}

}  // namespace trident::planner
