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

}  // namespace trident::planner
