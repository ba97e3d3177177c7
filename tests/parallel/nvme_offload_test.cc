// ZeRO-Infinity's optimizer tier (parallel.offload_optimizer_device = "nvme", issue #52): each
// rank's fp32 masters and AdamW moments in a scratch file under parallel.nvme_path, stepped
// unit by unit with the next units read ahead, on 1 and 2 ranks:
//   - tiny GPT-2 and llama, ZeRO 1, 2 and 3 (fp32, and bf16 whose masters are apart), small
//     buckets and smaller units, so that the tier holds many regions, segments span units and
//     the staging buffers are reused within a step: 20 steps' losses equal the in-memory run's
//     bit for bit;
//   - on the emulated device, the tier behind host memory gives ZeRO-Offload's losses bit for
//     bit, with no optimizer state on the device;
//   - with expert parallelism (two ZeRO groups, a file each), the same bit for bit;
//   - a checkpoint of a tier run resumes in a plain run, and a plain run's in a tier run, to the
//     uninterrupted run's losses bit for bit;
//   - a checkpoint streams the state from the tier: optimizer-state memory peaks at the staging
//     buffers and one piece;
//   - the tier's files are scratch: out of nvme_path's listing once open, closed at the end;
//   - a byte changed in the tier's file mid-run ends the run with the file and offset, and the
//     last checkpoint resumes (in a plain run) to the uninterrupted losses;
//   - metrics.jsonl and Prometheus carry each step's tier traffic;
//   - the keys are checked: nvme without offload or without ZeRO, and a path that is not a
//     directory, are errors naming the keys.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/allocator.h"
#include "monitor/prometheus_text.h"
#include "support/error_of.h"
#include "support/nvme_tier_test.h"

namespace trident::train {
namespace {

namespace fs = std::filesystem;

class NvmeOffloadTest : public testing::NvmeTierTest {
 protected:
  TrainConfig config(const std::string& arch, const std::string& out) const {
    TrainConfig cfg = tier_run_config(arch, out);
    cfg.parallel.bucket_mb = 0.004;  // about 1000 elements a bucket: dozens of regions
    return cfg;
  }
  // metrics.jsonl's "nvme" of every step: the whole tier written once a step, the same bytes
  // every step, and read as much (the units of 700 elements outnumber the staging buffers, so
  // every region comes back from the disk).
  static void expect_tier_traffic(const std::string& out_dir, size_t steps) {
    std::ifstream in(out_dir + "/metrics.jsonl");
    std::string line;
    std::vector<int64_t> written;
    while (std::getline(in, line)) {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (!j.contains("loss")) continue;
      ASSERT_TRUE(j.contains("nvme")) << line;
      const int64_t r = j["nvme"]["read_bytes"].get<int64_t>(), w = j["nvme"]["written_bytes"].get<int64_t>();
      EXPECT_EQ(r, w) << line;
      EXPECT_GE(j["nvme"]["wait_s"].get<double>(), 0.0) << line;
      written.push_back(w);
    }
    ASSERT_EQ(written.size(), steps);
    EXPECT_GT(written.front(), 0);
    for (int64_t w : written) EXPECT_EQ(w, written.front());
  }
  void on_nvme(TrainConfig& cfg) const {
    cfg.parallel.offload_optimizer = true;
    cfg.parallel.offload_optimizer_device = "nvme";
    cfg.parallel.nvme_path = tier_dir().string();
    cfg.parallel.nvme_buffer_count = 3;
    // Units of 700 elements: many more than the buffers, cut across parameters (segments span
    // units) and across the 1000-element buckets.
    cfg.parallel.nvme_buffer_mb = 700.0 * 4 / (1 << 20);
    cfg.train.out_dir += "_nvme";
  }
};

TEST_F(NvmeOffloadTest, TheTierGivesTheInMemoryLossesBitForBit) {
  for (const std::string arch : {"gpt2", "llama"})
    for (const std::string dtype : {"fp32", "bf16"})
      for (int64_t stage : {1, 2, 3}) {
        if (dtype == "bf16" && stage == 2) continue;  // bf16's masters apart: stages 1 and 3 cover it
        const std::string what = arch + " " + dtype + " ZeRO-" + std::to_string(stage) + ", " +
                                 std::to_string(world->size()) + " ranks";
        SCOPED_TRACE(what);
        TrainConfig cfg = config(arch, arch + dtype + std::to_string(stage));
        cfg.precision.dtype = dtype;
        cfg.parallel.zero_stage = stage;
        const Run plain = train(cfg, world);
        on_nvme(cfg);
        const Run tier = train(cfg, world);
        ASSERT_EQ(plain.losses.size(), 20u);
        EXPECT_EQ(tier.losses, plain.losses);
        EXPECT_TRUE(fs::is_empty(tier_dir())) << "the tier's files are scratch, out of the directory once open";
        EXPECT_TRUE(open_tier_file().empty()) << "the tier's file is still open after the run";
        if (world->rank() == 0) expect_tier_traffic(cfg.train.out_dir, plain.losses.size());
      }
}

// On a device (the tests' emulated accelerator, whose kernels are the host's), the tier sits
// behind host memory: each gradient shard goes to the host as under ZeRO-Offload, the CPU steps
// the state unit by unit from the disk, and the updated parameters go back to the device. The
// losses equal ZeRO-Offload's (state in host memory) bit for bit, the device never holds
// optimizer state, and a checkpoint of the device run resumes to the same losses.
TEST_F(NvmeOffloadTest, OnADeviceTheTierSitsBehindHostMemory) {
  const Device device = testing::emulated_device();
  for (const std::string dtype : {"fp32", "bf16"})
    for (int64_t stage : {1, 2, 3}) {
      if (dtype == "bf16" && stage == 2) continue;
      const std::string what = dtype + " ZeRO-" + std::to_string(stage) + ", " + std::to_string(world->size()) + " ranks";
      SCOPED_TRACE(what);
      TrainConfig cfg = config("llama", "device_" + dtype + std::to_string(stage));
      cfg.precision.dtype = dtype;
      cfg.parallel.zero_stage = stage;
      cfg.parallel.offload_optimizer = true;
      cfg.train.steps = 8;
      cfg.train.checkpoint_interval = 4;
      const Run host_memory = train(cfg, world, -1, device);
      on_nvme(cfg);
      device_allocator(device.type)->reset_peak_stats();
      const MemoryStats before = device_allocator(device.type)->stats();
      const Run tier = train(cfg, world, -1, device);
      const MemoryStats after = device_allocator(device.type)->stats();
      ASSERT_EQ(host_memory.losses.size(), 8u);
      EXPECT_EQ(tier.losses, host_memory.losses);
      EXPECT_EQ(after.category(MemoryCategory::kOptimizerState).peak,
                before.category(MemoryCategory::kOptimizerState).current)
          << "optimizer state was allocated on the device";
      if (world->rank() == 0) expect_tier_traffic(cfg.train.out_dir, tier.losses.size());
      if (stage != 2) continue;
      cfg.train.resume = true;  // from step 4, on the tier again
      if (world->rank() == 0) fs::remove_all(fs::path(cfg.train.out_dir) / "step_000008");
      world->barrier();
      EXPECT_EQ(train(cfg, world, -1, device).losses,
                std::vector<double>(host_memory.losses.begin() + 4, host_memory.losses.end()));
    }
}

TEST_F(NvmeOffloadTest, ExpertParallelGroupsEachKeepTheirStateOnTheTier) {
  if (world->size() != 2) GTEST_SKIP() << "ep 2 on 2 ranks";
  // A mixture of experts under ep 2: the dense parameters' ZeRO group (2 ranks) and the experts'
  // (1 rank each) are two optimizers, each with its own file on the tier.
  TrainConfig cfg = config("llama", "ep2");
  cfg.model.family_values = {{"n_kv_heads", int64_t{1}},         {"intermediate_size", int64_t{48}},
                             {"num_local_experts", int64_t{4}},  {"num_experts_per_tok", int64_t{2}},
                             {"moe_intermediate_size", int64_t{32}}, {"router_aux_loss_coef", 0.05}};
  cfg.parallel.ep = 2;
  cfg.parallel.zero_stage = 1;
  const Run plain = train(cfg, world);
  on_nvme(cfg);
  const Run tier = train(cfg, world);
  ASSERT_EQ(plain.losses.size(), 20u);
  EXPECT_EQ(tier.losses, plain.losses);
}

TEST_F(NvmeOffloadTest, CheckpointsMoveBetweenTheTierAndMemory) {
  TrainConfig cfg = config("llama", "checkpoints");
  cfg.parallel.zero_stage = 2;
  expect_checkpoints_move_between_tier_and_memory(cfg, [this](TrainConfig& c) {
    c.parallel.offload_optimizer = true;
    c.parallel.offload_optimizer_device = "nvme";
    c.parallel.nvme_path = tier_dir().string();
  });
}

// A checkpoint of a tier run reads the state from the disk as it writes each piece (Note
// [Streaming the tier into a checkpoint] in parallel/zero.cc): host memory holds the staging
// buffers and one piece, never the state, which is what the tier keeps out of memory. (Copying
// the state out first, as the first version did, peaks at the whole state: 12 bytes per
// element of the shard.)
TEST_F(NvmeOffloadTest, ACheckpointStreamsTheStateFromTheTier) {
  for (int64_t stage : {1, 3}) {
    SCOPED_TRACE("ZeRO-" + std::to_string(stage));
    TrainConfig cfg = config("llama", "stream" + std::to_string(stage));
    cfg.parallel.zero_stage = stage;
    cfg.train.steps = 4;
    cfg.train.checkpoint_interval = 2;
    on_nvme(cfg);
    host_allocator().reset_peak_stats();
    const int64_t before = host_allocator().stats().category(MemoryCategory::kOptimizerState).current;
    auto t = Trainer::create(cfg, world);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    t.value()->show_progress = false;
    int64_t elements = 0, largest = 0;
    for (const auto& [name, p] : t.value()->model().named_parameters()) {
      elements += p.numel();
      largest = std::max(largest, p.numel());
    }
    ASSERT_TRUE(t.value()->run().is_ok());
    ASSERT_TRUE(fs::exists(fs::path(cfg.train.out_dir) / "step_000004" / "DONE"));
    const int64_t peak = host_allocator().stats().category(MemoryCategory::kOptimizerState).peak - before;
    // Three staging buffers of three 4096-aligned arrays (plus their alignment slack), one
    // piece (at most the largest parameter), and a kilobyte for the optimizer's scalars.
    const int64_t bound = 3 * (3 * 4096 + 4096) + 4 * largest + 1024;
    const int64_t state = 12 * elements / world->size();
    ASSERT_LT(bound, state / 2) << "the model is too small to tell streaming from copying";
    EXPECT_LE(peak, bound) << "optimizer-state memory peaked at " << peak << " bytes; the state is " << state;
    EXPECT_GT(peak, 0);
  }
}

TEST_F(NvmeOffloadTest, AByteChangedInTheTierEndsTheRunNamingTheFileAndTheCheckpointIsIntact) {
  if (world->size() != 1) GTEST_SKIP() << "one rank: the fault is this process's";
  TrainConfig cfg = config("gpt2", "fault");
  cfg.parallel.zero_stage = 1;
  cfg.train.steps = 8;
  cfg.train.checkpoint_interval = 4;
  const Run whole = train(cfg, world);
  on_nvme(cfg);
  std::string message;
  int64_t steps = 0;
  {
    auto t = train::Trainer::create(cfg, world);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    t.value()->show_progress = false;
    t.value()->on_step = [&](const StepMetrics& m) {
      if (++steps != 5) return;
      // After step 5 (a checkpoint at 4): a byte of the first bucket's region changes on disk.
      // That region was written first in the step and its buffer reused since, so the next
      // step reads it from the disk.
      const fs::path file = open_tier_file();
      ASSERT_FALSE(file.empty()) << "no open file of the tier under " << tier_dir();
      flip_byte(file, 100);
    };
    message = run_error(*t.value());
  }
  EXPECT_EQ(steps, 5) << "the run went on after the tier's bytes changed";
  EXPECT_NE(message.find("the NVMe tier's file '" + tier_dir().string()), std::string::npos) << message;
  EXPECT_NE(message.find("at offset 0 are not what was written there"), std::string::npos) << message;
  EXPECT_TRUE(fs::is_empty(tier_dir()));
  // The checkpoint at step 4 is whole: a plain run resumes from it to the uninterrupted losses.
  cfg.parallel = {};
  cfg.parallel.zero_stage = 1;
  cfg.train.resume = true;
  const Run rest = train(cfg, world);
  EXPECT_EQ(rest.losses, std::vector<double>(whole.losses.begin() + 4, whole.losses.end()));
}

TEST_F(NvmeOffloadTest, PrometheusShowsTheLastStepsTraffic) {
  TrainConfig cfg = config("llama", "prometheus");
  cfg.parallel.zero_stage = 2;
  cfg.train.steps = 3;
  on_nvme(cfg);
  auto t = train::Trainer::create(cfg, world);
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  t.value()->show_progress = false;
  std::optional<StepMetrics::NvmeTraffic> last;
  t.value()->on_step = [&](const StepMetrics& m) { last = m.nvme; };
  ASSERT_TRUE(t.value()->run().is_ok());
  ASSERT_TRUE(last.has_value());
  const std::string text = monitor::prometheus_text(t.value()->monitor()->registry());
  for (const auto& [direction, bytes] : {std::pair{"read", last->read_bytes}, std::pair{"write", last->written_bytes}})
    EXPECT_NE(text.find("trident_nvme_bytes{direction=\"" + std::string(direction) + "\"} " + std::to_string(bytes)),
              std::string::npos)
        << text;
  EXPECT_NE(text.find("trident_nvme_wait_seconds "), std::string::npos) << text;
}

TEST_F(NvmeOffloadTest, TheKeysAreChecked) {
  TrainConfig cfg = config("gpt2", "keys");
  cfg.parallel.offload_optimizer_device = "nvme";
  cfg.parallel.nvme_path = tier_dir().string();
  cfg.parallel.zero_stage = 1;
  std::string e = testing::error_of([&] { train::Trainer::check_layout(cfg, world->size()); });
  EXPECT_NE(e.find("parallel.offload_optimizer = true and parallel.zero_stage 1-3"), std::string::npos) << e;
  cfg.parallel.offload_optimizer = true;
  cfg.parallel.nvme_path = "";
  e = testing::error_of([&] { train::Trainer::check_layout(cfg, world->size()); });
  EXPECT_NE(e.find("needs parallel.nvme_path"), std::string::npos) << e;
  cfg.parallel.nvme_path = (dir / "no_such_directory").string();
  std::string created = testing::error_of([&] {
    auto t = train::Trainer::create(cfg, world);
    if (!t.is_ok()) throw std::runtime_error(t.status().to_string());
  });
  EXPECT_NE(created.find("parallel.nvme_path = '" + cfg.parallel.nvme_path + "' is not a directory"),
            std::string::npos)
      << created;
}

}  // namespace
}  // namespace trident::train
