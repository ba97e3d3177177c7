// The planner's NVMe tier (planner/nvme_tier.h): units cut as the trainer cuts them, staging
// buffers and disk bytes per step (Note [The tier's memory and bytes]); the step's exposed disk
// time (Note [The tier's step time]); the tier in the search, the pins, the table and the JSON;
// a plan with the tier needs the disk's rates; beside a GPU the staging buffers are the host's
// and the device holds no optimizer state; calibrate measures
// the disk through the tier's own file. tests/planner_mpi/memory_accuracy_test checks the
// memory and bytes against real runs.
#include <gtest/gtest.h>

#include <filesystem>

#include "planner/calibrate.h"
#include "planner/layout_pins.h"
#include "planner/nvme_tier.h"
#include "planner/plan.h"
#include "support/planner_runs.h"

namespace trident::planner {
namespace {

using testing::gpt_run;

TEST(NvmeTier, UnitsAreCutAtSixteenElementStepsOfASegment) {
  // Segments [0, 100) and [100, 1000), units of at most 300: a cut inside the second segment
  // moves back to 100 + a multiple of 16: 292, 288, 288, then the 132 left.
  const std::vector<std::pair<int64_t, int64_t>> segments = {{0, 100}, {100, 1000}};
  NvmeTierSpec spec;
  spec.unit_elements = 300;
  spec.buffer_count = 2;
  const TierState t = optimizer_tier(segments, 1000, spec);
  EXPECT_EQ(t.units, 4);
  // Each array of a unit in one aligned 4096 bytes; 3 arrays a region.
  EXPECT_EQ(t.file_bytes, 4 * 3 * 4096);
  EXPECT_EQ(t.staging_bytes, 2 * (3 * 4096 + 4096));  // two buffers, each aligned by 4096 more
  EXPECT_EQ(t.traffic.written_bytes, t.file_bytes);
  EXPECT_EQ(t.traffic.read_bytes, t.file_bytes) << "more units than buffers: every region read back";
  spec.buffer_count = 4;
  const TierState kept = optimizer_tier(segments, 1000, spec);
  EXPECT_EQ(kept.traffic.read_bytes, 0) << "every unit stays in its buffer";
  EXPECT_EQ(kept.staging_bytes, 4 * (3 * 4096 + 4096));
  spec.buffer_count = 8;
  EXPECT_EQ(optimizer_tier(segments, 1000, spec).staging_bytes, 4 * (3 * 4096 + 4096)) << "no more buffers than units";
}

// A tiny GPT-2 on 2 CPU ranks of one node with a disk of 1 GB/s reads and 2 GB/s writes.
struct TierPlan {
  RunSpec run = gpt_run(4, 256, 4, 256, 8);
  Cluster cluster = local_cluster(2);
  TierPlan() {
    run.nvme.unit_elements = 1 << 18;  // 1 MiB per array: more units than buffers
    cluster.shape.disk_read_gbs = 1.0;
    cluster.shape.disk_write_gbs = 2.0;
  }
  Plan plan(const std::string& pins) const {
    SearchSpace space;
    space.ranks = 2;
    space.nvme = true;
    if (!pins.empty()) space.pins = parse_layout_pins(pins).value();
    return make_plan(run, cluster, space, true);
  }
};

TEST(NvmeTier, TheOptimizerStateIsItsStagingBuffersAndTheDiskTimeAddsToTheStep) {
  const TierPlan t;
  const Candidate tier = t.plan("dp2 zero1+nvme ckpt=none b4 m1").ranked.at(0);
  const Candidate memory = t.plan("dp2 zero1 ckpt=none b4 m1").ranked.at(0);
  ASSERT_TRUE(tier.layout.nvme);
  EXPECT_EQ(tier.layout.str(), "dp2 tp1 pp1 zero1+nvme ckpt=none b4 m1");
  // In memory: 8 bytes of moments per element of the shard (fp32: the parameters are the
  // masters); on the tier 4 staging buffers of 3 MiB and 4 KiB.
  const int64_t staging = 4 * (3 * (int64_t{1} << 20) + 4096);
  EXPECT_EQ(tier.memory.category(MemoryCategory::kOptimizerState), staging);
  EXPECT_LT(staging, memory.memory.category(MemoryCategory::kOptimizerState));
  for (MemoryCategory c : {MemoryCategory::kParameter, MemoryCategory::kGradient, MemoryCategory::kActivation})
    EXPECT_EQ(tier.memory.category(c), memory.memory.category(c)) << memory_category_name(c);
  // Every region written and read back once a step: 12 bytes per element of the shard, and a
  // unit's padding to 4096 bytes per array.
  const double shard = static_cast<double>(t.run.shapes.num_parameters()) / 2.0;
  EXPECT_EQ(tier.time.disk.read_bytes, tier.time.disk.written_bytes);
  EXPECT_NEAR(static_cast<double>(tier.time.disk.written_bytes), 12.0 * shard, 0.01 * 12.0 * shard);
  EXPECT_EQ(tier.time.disk.written_bytes, disk_traffic(t.run, tier.layout).written_bytes);
  // Both ranks share the node's disk: twice one rank's bytes at its rates.
  const double disk = 2.0 * (static_cast<double>(tier.time.disk.read_bytes) / 1e9 +
                             static_cast<double>(tier.time.disk.written_bytes) / 2e9);
  EXPECT_NEAR(tier.time.disk_s, disk, 1e-12);
  EXPECT_GT(tier.time.exposed_disk_s, 0.0);
  EXPECT_LT(tier.time.exposed_disk_s, tier.time.disk_s);
  EXPECT_DOUBLE_EQ(tier.time.step_s(),
                   tier.time.compute_s + tier.time.exposed_comm_s + tier.time.bubble_s + tier.time.exposed_disk_s);
  EXPECT_DOUBLE_EQ(tier.time.compute_s, memory.time.compute_s);
  EXPECT_EQ(memory.time.exposed_disk_s, 0.0);
  // The table says what the disk moves; the JSON has its bytes and seconds.
  const Plan pinned = t.plan("dp2 zero1+nvme ckpt=none b4 m1");
  EXPECT_NE(plan_table(pinned, 1).find("read + "), std::string::npos) << plan_table(pinned, 1);
  const auto j = plan_json(pinned, 1)["ranked"][0];
  EXPECT_EQ(j["disk_bytes"]["read"].get<int64_t>(), tier.time.disk.read_bytes);
  EXPECT_EQ(j["disk_bytes"]["written"].get<int64_t>(), tier.time.disk.written_bytes);
  EXPECT_DOUBLE_EQ(j["time_s"]["exposed_disk"].get<double>(), tier.time.exposed_disk_s);
  EXPECT_EQ(j["layout"]["offload_device"], "nvme");
}

TEST(NvmeTier, WhatAdamWHidesIsAtMostTheKernelsRequestsPerUnit) {
  TierPlan t;
  // Units of 8 MiB per array through 2 buffers: a unit's region (24 MiB) outgrows the kernel's
  // 8 requests.
  t.run.nvme.unit_elements = 1 << 21;
  t.run.nvme.buffer_count = 2;
  t.run.nvme.queue_depth = 8;
  const Layout l = t.plan("dp2 zero1+nvme ckpt=none b4 m1").ranked.at(0).layout;
  const TierState s = predict_tier(t.run, l).front();
  const DiskTime none = disk_time(t.run, l, t.cluster, 0.0);
  EXPECT_DOUBLE_EQ(none.exposed_s, none.disk_s) << "no optimizer time to hide behind";
  const double rate = static_cast<double>(s.traffic.read_bytes + s.traffic.written_bytes) / none.disk_s;
  const double per_unit = 8.0 * (1 << 20) / rate;  // 8 requests of 1 MiB at the rank's share
  const DiskTime long_adamw = disk_time(t.run, l, t.cluster, 1e3);
  EXPECT_GT(s.units, 2);
  EXPECT_NEAR(long_adamw.exposed_s, none.disk_s - static_cast<double>(s.units + 1) * per_unit, 1e-12);
  // The default queue (128 requests) holds all of a unit's traffic (48 MiB): what hides is a
  // unit's traffic per unit, not the queue's, and with AdamW long enough all of it.
  t.run.nvme.queue_depth = 128;
  EXPECT_EQ(disk_time(t.run, l, t.cluster, 1e3).exposed_s, 0.0);
  const double per_unit_traffic = static_cast<double>(s.traffic.read_bytes + s.traffic.written_bytes) / s.units;
  EXPECT_LT(per_unit_traffic, 128.0 * (1 << 20));
  const double adamw = 0.5 * none.disk_s;
  EXPECT_NEAR(disk_time(t.run, l, t.cluster, adamw).exposed_s, none.disk_s - adamw, 1e-12);
  t.run.nvme.queue_depth = 8;
  // Small units: all of a unit's traffic fits in the kernel's requests, all of it hides.
  t.run.nvme.unit_elements = 1 << 18;
  EXPECT_EQ(disk_time(t.run, l, t.cluster, 1e3).exposed_s, 0.0);
  const DiskTime short_adamw = disk_time(t.run, l, t.cluster, 1e-3);
  EXPECT_NEAR(short_adamw.exposed_s, none.disk_s - 1e-3, 1e-12);
  // One unit that stays in its buffer: only its write.
  t.run.nvme.unit_elements = 1 << 23;
  t.run.nvme.buffer_count = 4;
  const TierState one = predict_tier(t.run, l).front();
  EXPECT_EQ(one.units, 1);
  EXPECT_EQ(one.traffic.read_bytes, 0);
  EXPECT_NEAR(disk_time(t.run, l, t.cluster, 0.0).disk_s, 2.0 * static_cast<double>(one.traffic.written_bytes) / 2e9,
              1e-12);
}

TEST(NvmeTier, TheSearchConsidersTheTierWhereAskedAndPinsIt) {
  const TierPlan t;
  SearchSpace space;
  space.ranks = 2;
  auto tiered = [&](const SearchSpace& s) {
    int n = 0;
    for (const Layout& l : enumerate_layouts(t.run, s)) n += l.nvme ? 1 : 0;
    return n;
  };
  EXPECT_EQ(tiered(space), 0);
  space.nvme = true;
  EXPECT_GT(tiered(space), 0);
  for (const Layout& l : enumerate_layouts(t.run, space)) {
    if (!l.nvme) continue;
    EXPECT_TRUE(l.offload && l.zero_stage > 0) << l.str();
    // The words the table writes pin the layout back, and its overrides run it.
    const LayoutPins pins = parse_layout_pins(l.str()).value();
    EXPECT_TRUE(pins.admits(l));
    const std::vector<std::string> o = l.overrides();
    EXPECT_NE(std::find(o.begin(), o.end(), "--parallel.offload_optimizer_device=nvme"), o.end());
  }
  // The override pins the tier (and offload with it).
  train::TrainConfig cfg;
  cfg.parallel.offload_optimizer_device = "nvme";
  const LayoutPins pins = pins_from_overrides(cfg, {"--parallel.offload_optimizer_device=nvme"});
  EXPECT_EQ(pins.str(), "offload_device=nvme");
  const Plan plan = t.plan("zero2+nvme");
  ASSERT_FALSE(plan.ranked.empty());
  for (const Candidate& c : plan.ranked) EXPECT_TRUE(c.layout.nvme && c.layout.zero_stage == 2) << c.layout.str();
  EXPECT_EQ(plan.pins.str(), "zero2 offload=nvme");
  auto bad = parse_layout_pins("zero1+offload+nvme");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("two places"), std::string::npos);
}

TEST(NvmeTier, APlanWithTheTierNeedsTheDisksRates) {
  const TierPlan t;
  Cluster unknown = local_cluster(2);
  const Status s = check_disk_rates(unknown, "calib.toml");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("disk_read_gbs"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("trident calibrate --parallel.nvme_path"), std::string::npos) << s.message();
  EXPECT_TRUE(check_disk_rates(t.cluster, "calib.toml").is_ok());
  const Layout l = t.plan("dp2 zero1+nvme ckpt=none b4 m1").ranked.at(0).layout;
  EXPECT_THROW(predict_time(t.run, l, unknown), Error);
}

// Beside a GPU the tier stages through the host, which keeps ZeRO-Offload's gradient shard and
// rounded masters too; the device has no optimizer state, as under ZeRO-Offload.
TEST(NvmeTier, BesideAGpuTheStagingBuffersAreTheHosts) {
  TierPlan t;
  t.run = gpt_run(4, 256, 4, 256, 8, DType::kBF16);
  t.run.nvme.unit_elements = 1 << 18;
  t.run.place_on_device();
  t.cluster.device.kind = "gpu";
  const Candidate tier = t.plan("dp2 zero1+nvme ckpt=none b4 m1").ranked.at(0);
  const Candidate offload = t.plan("dp2 zero1+offload ckpt=none b4 m1").ranked.at(0);
  EXPECT_EQ(tier.memory.category(MemoryCategory::kOptimizerState), 0);
  const auto host = [](const Candidate& c, MemoryCategory m) { return c.memory.host_peak_bytes[static_cast<size_t>(m)]; };
  const int64_t shard = predict_tier(t.run, tier.layout).front().file_bytes / 12;  // about: padding aside
  const int64_t staging = 4 * (3 * (int64_t{1} << 20) + 4096);
  // The rounded bf16 masters (2 bytes per element) beside the staging buffers.
  EXPECT_NEAR(static_cast<double>(host(tier, MemoryCategory::kOptimizerState)), static_cast<double>(staging + 2 * shard),
              0.01 * static_cast<double>(2 * shard));
  EXPECT_LT(host(tier, MemoryCategory::kOptimizerState), host(offload, MemoryCategory::kOptimizerState));
  EXPECT_EQ(host(tier, MemoryCategory::kGradient), host(offload, MemoryCategory::kGradient));
  for (MemoryCategory c : {MemoryCategory::kParameter, MemoryCategory::kGradient, MemoryCategory::kActivation})
    EXPECT_EQ(tier.memory.category(c), offload.memory.category(c)) << memory_category_name(c);
  EXPECT_GT(tier.time.exposed_disk_s, 0.0);
}

TEST(NvmeTier, CalibrateMeasuresTheDiskThroughTheTiersFileAndLeavesNothing) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "nvme_tier_calibrate";
  std::filesystem::create_directories(dir);
  parallel::ParallelOptions p;
  p.nvme_path = dir.string();
  p.nvme_buffer_mb = 1;
  const DiskRates rates = calibrate_disk(p, nullptr, int64_t{16} << 20);
  EXPECT_GT(rates.read_gbs, 0.0);
  EXPECT_GT(rates.write_gbs, 0.0);
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

}  // namespace
}  // namespace trident::planner
