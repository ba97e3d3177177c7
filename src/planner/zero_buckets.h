// ZeRO's flat layout of one pipeline stage's trained parameters, as the trainer lays it out
// (parallel/zero/layout.h), from the planner's shapes (planner/placements.h) instead of a model:
// the reduction groups (one ZeroOptimizer each, parallel/parallelize.cc), each group's buckets
// padded to a multiple of its ranks, and one rank's shards of them. The memory model's flat
// buffers and staged gradients (planner/memory_model.cc) and the NVMe tier's units
// (planner/nvme_tier.h) are read from it. Nothing here is communicated or allocated.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "planner/layout.h"

namespace trident::planner {

struct ZeroBuckets {
  // Each bucket's parameters (indices into the stage's parameters), in the order the flat
  // buffer holds them; every group's buckets in turn, the dense group's first.
  std::vector<std::vector<size_t>> members;
  std::vector<size_t> owner;    // each bucket's group
  std::vector<int64_t> padded;  // each bucket's elements, padded to a multiple of its group's ranks
  std::vector<int64_t> ranks;   // each group's ranks: dp x ep for the dense parameters, dp for ep-placed experts
  int64_t flat = 0;             // every group's flat buffer
  int64_t shard = 0;            // one rank's shards of them
  size_t groups() const { return ranks.size(); }
};

// The stage whose trained parameters have `numels` elements (in model order), blocks `where`
// (CausalLM::block_of) and `expert` (placed by expert parallelism: reduced over dp alone):
// the dense parameters over dp x ep, the experts over dp (Note [Placements]); without expert
// parallelism one group over dp. ZeRO 1-2 buckets are parallel::group_in_buckets' of
// `bucket_bytes`; ZeRO-3's the model's parts (the root, then one per block of the model's
// `layers`, empty ones included, as the trainer's parts are).
ZeroBuckets zero_buckets(const std::vector<int64_t>& numels, const std::vector<int64_t>& where,
                         const std::vector<bool>& expert, const Layout& l, int64_t layers, int64_t bucket_bytes);

// Rank `rank`'s segments of group `group` (the parts of its parameters inside the rank's shard
// of each bucket) as [begin, end) in the rank's concatenated shards of that group, in order;
// what ZeroLayout::segments_of gives the trainer.
std::vector<std::pair<int64_t, int64_t>> shard_segments(const ZeroBuckets& z, const std::vector<int64_t>& numels,
                                                        size_t group, int64_t rank);
// The elements of one rank's concatenated shards of group `group` (padding included).
int64_t group_shard(const ZeroBuckets& z, size_t group);

}  // namespace trident::planner
