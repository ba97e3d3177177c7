#include "planner/nvme_tier.h"

#include <algorithm>

#include "offload/nvme_file.h"
#include "parallel/zero/state_store.h"
#include "planner/placements.h"

namespace trident::planner {
namespace {

constexpr int64_t kArrays = 3;  // masters, m and v (Note [The tier's memory and bytes])

}  // namespace

TierState optimizer_tier(const std::vector<std::pair<int64_t, int64_t>>& segments, int64_t shard,
                         const NvmeTierSpec& spec) {
  TierState t;
  int64_t largest = 0;  // one array's bytes in the largest unit's region
  const int64_t limit = std::max<int64_t>(spec.unit_elements, 64);
  for (const parallel::zero::StateUnit& u : parallel::zero::cut_units(segments, shard, limit)) {  // as NvmeState's
    const int64_t part = offload::nvme_aligned(4 * u.length);
    t.file_bytes += kArrays * part;
    largest = std::max(largest, part);
    ++t.units;
  }
  t.staging_bytes = std::min(t.units, spec.buffer_count) * (kArrays * largest + offload::kNvmeAlignment);
  t.traffic.written_bytes = t.file_bytes;
  t.traffic.read_bytes = t.units > spec.buffer_count ? t.file_bytes : 0;
  return t;
}

TierState stage_tier(const ZeroBuckets& z, const std::vector<int64_t>& numels, const NvmeTierSpec& spec) {
  TierState sum;
  for (size_t g = 0; g < z.groups(); ++g) {
    const TierState t = optimizer_tier(shard_segments(z, numels, g, 0), group_shard(z, g), spec);
    sum.units += t.units;
    sum.staging_bytes += t.staging_bytes;
    sum.file_bytes += t.file_bytes;
    sum.traffic += t.traffic;
  }
  return sum;
}

std::vector<TierState> predict_tier(const RunSpec& run, const Layout& l) {
  std::vector<TierState> out(static_cast<size_t>(l.pp));
  if (!l.nvme) return out;
  const std::vector<StageParameters>& stages = stages_of(run, l);
  for (size_t r = 0; r < stages.size(); ++r) {
    const StageParameters& s = stages[r];
    out[r] = stage_tier(zero_buckets(s.numels, s.blocks, s.expert, l, run.model.n_layer, run.bucket_bytes), s.numels,
                        run.nvme);
  }
  return out;
}

DiskTraffic disk_traffic(const RunSpec& run, const Layout& l) {
  DiskTraffic most;
  for (const TierState& t : predict_tier(run, l))
    if (t.traffic.read_bytes + t.traffic.written_bytes > most.read_bytes + most.written_bytes) most = t.traffic;
  return most;
}

// Note [The tier's step time]
// How does the disk's time enter the step? As the trainer works (ShardedAdamW::step): for each
// unit it waits for the unit's read, starts reading the next ones (as many as buffers are
// free), runs AdamW on it and starts writing it back. Requests progress beyond what the kernel
// holds only inside those calls (offload/nvme_file.h): while AdamW steps a unit, the kernel
// has at most nvme_queue_depth requests of 1 MiB to work on, and through the forward and
// backward only what the last call left it. With a queue of at least a unit's requests (the
// default 128 against 2 x 96 MiB of a unit's read and write), the disk works through every
// AdamW; with a shallower one (8 was the default until the 2.5B run of
// bench/results/2026-12-01-nvme-beyond-memory-zen5: wait 28.3 s + AdamW 11.5 s = the 39.8 s
// optimizer phase, 28.5 s with 128) it idles through most of it. The forward and backward
// hide almost nothing either way: a rank's state is larger than the buffers that could hold
// it ahead (that is why it is on the disk). So disk_s is the rank's reads at the read rate
// plus its writes at the write rate, times the ranks of a node (they share its disk, and step
// their tiers at once; the calibrated rates are the node's, all its ranks together), and what
// hides is at most min(queue_depth x 1 MiB, a unit's traffic) per unit (and one more set
// behind the forward), each unit's no longer than its AdamW: exposed = disk_s - min(adamw_s,
// (units + 1) x that at the rank's share of the disk's rate, disk_s). Beside a device, AdamW is
// the host's (ZeRO-Offload's rate). Pipeline stages are taken at the slowest stage's traffic
// on every rank of the node (an upper bound).
DiskTime disk_time(const RunSpec& run, const Layout& l, const Cluster& cluster, double adamw_s) {
  DiskTime out;
  if (!l.nvme) return out;
  const double read = cluster.shape.disk_read_gbs * 1e9, write = cluster.shape.disk_write_gbs * 1e9;
  TRI_CHECK(read > 0.0 && write > 0.0, check_disk_rates(cluster, "the cluster").message());
  const double sharing = static_cast<double>(std::min(l.ranks(), cluster.shape.devices_per_node));
  const double in_kernel = static_cast<double>(run.nvme.queue_depth * offload::NvmeFileOptions{}.request_bytes);
  for (const TierState& t : predict_tier(run, l)) {
    const double r = static_cast<double>(t.traffic.read_bytes), w = static_cast<double>(t.traffic.written_bytes);
    const double disk = sharing * (r / read + w / write);
    if (disk <= 0.0) continue;
    const double rate = (r + w) / disk;  // this rank's share
    const double per_unit = std::min(in_kernel, (r + w) / static_cast<double>(std::max<int64_t>(t.units, 1)));
    const double hidden = std::min({adamw_s, static_cast<double>(t.units + 1) * per_unit / rate, disk});
    if (disk - hidden > out.exposed_s || (disk - hidden == out.exposed_s && disk > out.disk_s)) {
      out.traffic = t.traffic;
      out.disk_s = disk;
      out.exposed_s = disk - hidden;
    }
  }
  return out;
}

Status check_disk_rates(const Cluster& cluster, const std::string& source) {
  if (cluster.shape.disk_read_gbs > 0.0 && cluster.shape.disk_write_gbs > 0.0) return Status::ok();
  return Status::invalid(
      "the NVMe tier's layouts need the disk's rates, and " + source +
      " has no cluster.disk_read_gbs and disk_write_gbs (GB/s of each node's disk under parallel.nvme_path): "
      "`trident calibrate --parallel.nvme_path=DIR --out FILE` measures them into a cluster file for --cluster, "
      "or set them in the file");
}

}  // namespace trident::planner
