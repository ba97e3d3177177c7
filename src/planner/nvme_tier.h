// The planner's NVMe tier (ZeRO-Infinity's optimizer tier, parallel/zero/state_store.h): what a
// layout that keeps the optimizer state on a disk (Layout::nvme) costs a rank in host memory,
// disk bytes per step and step time, counted as the trainer cuts that state into units and
// walks them. Not here: ZeRO-3's parameters on NVMe (parallel.offload_param), whose traffic
// disk_traffic() would add to the optimizer's.
//
// Note [The tier's memory and bytes]
// A rank's state of each ZeRO group (one file each) is cut into units of at most
// nvme_buffer_mb per array, at a parameter segment's 16-element steps (Note [Units that keep
// the update's bits] in state_store.cc), each a region of [masters | m | v] whose arrays are
// 4096-byte aligned: 3 arrays, since under offload the masters are apart from the parameters
// even in fp32. Host memory holds min(units, nvme_buffer_count) staging buffers, each the
// largest unit's region and 4096 bytes to align it (MemoryCategory::kOptimizerState), in place
// of 12 bytes per element of the shard: on CPU ranks that is the rank's memory, and the other
// categories are what they are in memory; beside a device it is the host's, with what
// ZeRO-Offload keeps there besides (the gradient shard, and under mixed precision the masters
// rounded on their way to the device: Note [ZeRO-Offload's memory]), and the device holds no
// optimizer state. A step writes every region once and reads every region once, unless every
// unit stays in a buffer from the step before (no more units than buffers): then it reads
// nothing. Counted for the stage's first data-parallel rank: another rank's segments start
// elsewhere, so its cuts (and with them a unit's 4096-byte padding) may differ by a few
// elements. A checkpoint reads the state back one piece at a time (Note [Streaming the tier
// into a checkpoint] in parallel/zero.cc): the save's memory, not the step's.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "planner/cluster.h"
#include "planner/layout.h"
#include "planner/run_spec.h"
#include "planner/zero_buckets.h"

namespace trident::planner {

// Bytes one rank asks of its node's disk in one training step (what metrics.jsonl's "nvme"
// counts).
struct DiskTraffic {
  int64_t read_bytes = 0, written_bytes = 0;
  DiskTraffic& operator+=(const DiskTraffic& o) {
    read_bytes += o.read_bytes;
    written_bytes += o.written_bytes;
    return *this;
  }
};

// One rank's optimizer state on the tier: one ZeRO group's, or a stage's groups' together.
struct TierState {
  int64_t units = 0;
  int64_t staging_bytes = 0;  // the staging buffers, in host memory
  int64_t file_bytes = 0;     // every unit's region: the scratch file
  DiskTraffic traffic;        // per step
};

// One group's: `segments` are the rank's parameter segments, [begin, end) in its concatenated
// shards in order (planner/zero_buckets.h's shard_segments), `shard` their elements with padding.
TierState optimizer_tier(const std::vector<std::pair<int64_t, int64_t>>& segments, int64_t shard,
                         const NvmeTierSpec& spec);
// A stage's, whose ZeRO buckets are `z` over parameters of `numels` elements: each group's
// (its first data-parallel rank's), summed.
TierState stage_tier(const ZeroBuckets& z, const std::vector<int64_t>& numels, const NvmeTierSpec& spec);
// Each pipeline stage's, for a layout on the tier (l.nvme); zeros otherwise.
std::vector<TierState> predict_tier(const RunSpec& run, const Layout& l);

// Disk bytes per rank and step, the largest stage's: the optimizer tier's today.
DiskTraffic disk_traffic(const RunSpec& run, const Layout& l);

struct DiskTime {
  DiskTraffic traffic;   // the slowest stage's, per rank
  double disk_s = 0.0;   // the disk's time for the step's traffic (the node's ranks sharing it)
  double exposed_s = 0.0;  // what the optimizer's compute does not hide (Note [The tier's step time])
};
// The tier's disk time of `l` on `cluster` (whose disk rates must be known: check_disk_rates),
// `adamw_s` the optimizer's own time per step on the slowest stage.
DiskTime disk_time(const RunSpec& run, const Layout& l, const Cluster& cluster, double adamw_s);

// OK when `cluster` (read from `source`: a file, or this machine) has the disk's rates a plan
// with the tier needs; else an error naming the missing keys and how to measure them.
Status check_disk_rates(const Cluster& cluster, const std::string& source);

}  // namespace trident::planner
