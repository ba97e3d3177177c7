// ZeRO-Infinity's parameter tier (parallel.offload_param = "nvme", issue #52): ZeRO-3's
// parameter shard in a scratch file per rank under parallel.nvme_path, each part's shard read
// ahead of its all-gathers and written back as the step finishes it, on 1 and 2 ranks:
//   - tiny GPT-2 and llama, fp32 and bf16, with the optimizer's state in memory or on its own
//     tier (units cut across the parts, so a part's shard is finished over several units): 20
//     steps' losses equal the in-memory ZeRO-3 run's bit for bit;
//   - evaluations between the steps and activation checkpointing keep those bits;
//   - a checkpoint of a tier run resumes in a plain run, and a plain run's in a tier run, to
//     the uninterrupted losses bit for bit;
//   - the shard is not resident: the parameters' memory (the allocator's kParameter) peaks at
//     the staging buffers, a fraction of the shard the plain run holds;
//   - each step's traffic is the predicted one to the byte: every part's region read for its
//     forward and its backward gathers (but the last block's, still staged across the seam),
//     every region written once;
//   - a byte changed in the parameters' file mid-run ends the run naming the file and offset;
//   - on the emulated device, the tier behind host memory (with the optimizer's state on its
//     tier too, or in memory) gives the device's in-memory ZeRO-3 + offload losses bit for bit,
//     the device holds no parameter shard and no optimizer state, and a checkpoint resumes to
//     the same losses;
//   - the keys are checked, with messages naming them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "models/registry.h"
#include "offload/nvme_file.h"
#include "support/emulated_device.h"
#include "support/error_of.h"
#include "support/nvme_tier_test.h"

namespace trident::train {
namespace {

namespace fs = std::filesystem;

class NvmeParamTest : public testing::NvmeTierTest {
 protected:
  // ZeRO-3 with the optimizer's state offloaded to host memory: the control.
  TrainConfig config(const std::string& arch, const std::string& out) const {
    TrainConfig cfg = tier_run_config(arch, out);
    cfg.model.n_layer = 4;  // 5 parts: more than the tier's staging buffers
    cfg.parallel.zero_stage = 3;
    cfg.parallel.offload_optimizer = true;
    return cfg;
  }
  void params_on_nvme(TrainConfig& cfg) const {
    cfg.parallel.offload_param = "nvme";
    cfg.parallel.nvme_path = tier_dir().string();
    cfg.train.out_dir += "_params_nvme";
  }
  // And the optimizer's state on its tier, in units of 700 elements: finishing a part's shard
  // takes several units, and a unit finishes several parts.
  void optimizer_on_nvme(TrainConfig& cfg) const {
    cfg.parallel.offload_optimizer_device = "nvme";
    cfg.parallel.nvme_path = tier_dir().string();
    cfg.parallel.nvme_buffer_count = 3;
    cfg.parallel.nvme_buffer_mb = 700.0 * 4 / (1 << 20);
    cfg.train.out_dir += "_optimizer_nvme";
  }
  // Each part's shard on this rank in bytes: the part padded to a multiple of the ranks, over
  // the ranks, in the compute dtype.
  std::vector<int64_t> shard_bytes(const TrainConfig& cfg) const {
    const int64_t N = world->size(), element = cfg.precision.dtype == "bf16" ? 2 : 4;
    std::vector<int64_t> out;
    for (const auto& part : models::build_model(cfg.model)->parts()) {
      int64_t n = 0;
      for (const auto& [name, p] : part) n += p.numel();
      out.push_back((n + N - 1) / N * element);
    }
    return out;
  }
  // Each part's region in this rank's parameters' file: its shard, rounded up to the 4096-byte
  // alignment.
  std::vector<int64_t> regions(const TrainConfig& cfg) const {
    std::vector<int64_t> out = shard_bytes(cfg);
    for (int64_t& r : out) r = offload::nvme_aligned(r);
    return out;
  }
  // The most the tier's `buffers` staging buffers may hold: each the largest part's region and
  // the alignment's slack.
  int64_t staging_bound(const TrainConfig& cfg, int64_t buffers) const {
    const std::vector<int64_t> region = regions(cfg);
    return buffers * (*std::max_element(region.begin(), region.end()) + offload::kNvmeAlignment);
  }
  // A category's bytes beyond those an allocator held before the run: at the run's end (the
  // trainer still alive) and at the peak over its steps (the peaks are reset once the trainer
  // is made: the model's values before ZeRO takes them are not the steps').
  struct Held {
    int64_t end = 0, peak = 0;
  };
  struct MeasuredRun {
    Run run;
    Held host_params;                  // kParameter of the host allocator
    Held device_params, device_state;  // kParameter and kOptimizerState of the device's
  };
  MeasuredRun measured_run(const TrainConfig& cfg, std::optional<Device> device = std::nullopt) const {
    Allocator* on_device = device ? device_allocator(device->type) : nullptr;
    const MemoryStats host_before = host_allocator().stats();
    const MemoryStats device_before = on_device ? on_device->stats() : MemoryStats{};
    MeasuredRun out;
    auto t = Trainer::create(cfg, world, device);
    EXPECT_TRUE(t.is_ok()) << t.status().to_string();
    if (!t.is_ok()) return out;
    t.value()->show_progress = false;
    t.value()->on_step = [&](const StepMetrics& m) { out.run.losses.push_back(m.loss); };
    host_allocator().reset_peak_stats();
    if (on_device) on_device->reset_peak_stats();
    const Status s = t.value()->run();
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    const auto held = [](const MemoryStats& before, const MemoryStats& after, MemoryCategory c) {
      return Held{after.category(c).current - before.category(c).current,
                  after.category(c).peak - before.category(c).current};
    };
    const MemoryStats host_after = host_allocator().stats();
    out.host_params = held(host_before, host_after, MemoryCategory::kParameter);
    if (on_device) {
      const MemoryStats device_after = on_device->stats();
      out.device_params = held(device_before, device_after, MemoryCategory::kParameter);
      out.device_state = held(device_before, device_after, MemoryCategory::kOptimizerState);
    }
    return out;
  }
};

TEST_F(NvmeParamTest, TheTierGivesTheInMemoryLossesBitForBit) {
  for (const std::string arch : {"gpt2", "llama"})
    for (const std::string dtype : {"fp32", "bf16"}) {
      const std::string what = arch + " " + dtype + ", " + std::to_string(world->size()) + " ranks";
      SCOPED_TRACE(what);
      TrainConfig cfg = config(arch, arch + dtype);
      cfg.precision.dtype = dtype;
      const Run plain = train(cfg, world);
      ASSERT_EQ(plain.losses.size(), 20u);
      TrainConfig params = cfg;
      params_on_nvme(params);
      EXPECT_EQ(train(params, world).losses, plain.losses) << "parameters on the tier, optimizer state in memory";
      TrainConfig both = params;
      optimizer_on_nvme(both);
      both.parallel.nvme_prefetch_depth = 1;  // 2 staging buffers: every one reused within a pass
      EXPECT_EQ(train(both, world).losses, plain.losses) << "parameters and optimizer state on their tiers";
      EXPECT_TRUE(fs::is_empty(tier_dir())) << "the tiers' files are scratch, out of the directory once open";
      EXPECT_TRUE(open_tier_file(".parameters").empty()) << "the parameters' file is still open after the run";
    }
}

// Evaluations between steps (forwards without a backward, which leave the recorded order
// alone) and blocks recomputed in the backward (activation checkpointing: no part is gathered
// for the recompute but the one the backward gathers anyway).
TEST_F(NvmeParamTest, EvaluationsAndRecomputedBlocksKeepTheBits) {
  for (const std::string checkpointing : {"none", "full"}) {
    SCOPED_TRACE("activation_checkpointing " + checkpointing);
    TrainConfig cfg = config("gpt2", "eval_" + checkpointing);
    cfg.precision.dtype = "bf16";
    cfg.model.activation_checkpointing = checkpointing;
    cfg.train.eval_interval = 5;
    const Run plain = train(cfg, world);
    ASSERT_EQ(plain.val.size(), 4u);
    params_on_nvme(cfg);
    const Run tier = train(cfg, world);
    EXPECT_EQ(tier.losses, plain.losses);
    EXPECT_EQ(tier.val, plain.val);
  }
}

TEST_F(NvmeParamTest, CheckpointsMoveBetweenTheTierAndMemory) {
  TrainConfig cfg = config("llama", "checkpoints");
  cfg.precision.dtype = "bf16";
  expect_checkpoints_move_between_tier_and_memory(cfg, [this](TrainConfig& c) { params_on_nvme(c); });
}

// The plain run holds the shard (kParameter) from start to end; the tier's parameters' memory
// is its staging buffers: nvme_prefetch_depth + 1 of them (each a part's region and the
// alignment's slack), here 2 of a model of 17 parts.
TEST_F(NvmeParamTest, TheShardIsNotResident) {
  for (const std::string dtype : {"fp32", "bf16"}) {
    SCOPED_TRACE(dtype);
    TrainConfig cfg = config("gpt2", "memory" + dtype);
    cfg.precision.dtype = dtype;
    cfg.model.n_layer = 16;
    cfg.train.steps = 3;
    cfg.parallel.nvme_prefetch_depth = 1;
    const std::vector<int64_t> part_shards = shard_bytes(cfg);
    const int64_t shard = std::accumulate(part_shards.begin(), part_shards.end(), int64_t{0});
    const auto [plain_held, plain_peak] = measured_run(cfg).host_params;
    params_on_nvme(cfg);
    const auto [tier_held, tier_peak] = measured_run(cfg).host_params;
    const int64_t staging = staging_bound(cfg, 2);
    if (world->rank() == 0)
      std::printf("%s, %d ranks: shard %lld B; kParameter held %lld B in memory, peak %lld B on the tier "
                  "(staging bound %lld B)\n",
                  dtype.c_str(), world->size(), static_cast<long long>(shard),
                  static_cast<long long>(plain_held), static_cast<long long>(tier_peak),
                  static_cast<long long>(staging));
    EXPECT_GE(plain_held, shard) << "the in-memory run holds the shard";
    EXPECT_GE(plain_peak, shard);
    EXPECT_GT(tier_peak, 0) << "the staging buffers are counted as parameters";
    EXPECT_LE(tier_peak, staging) << "more than the staging buffers of parameters in memory";
    EXPECT_LT(tier_peak, shard / 4);
    EXPECT_LE(tier_held, tier_peak);
  }
}

// Per step, with sum = every part's region and last = the last block's: a micro-batch reads
// 2 x sum - last (each part for its forward and its backward gather, except the last block,
// whose staging buffer is still held when the backward gathers it two parts later); the first
// step's first micro-batch has no recorded backward order yet and reads 2 x sum. The step
// writes sum. The reads of the next forward's first parts start at the end of a step, so each
// step carries one micro-batch's worth; the optimizer's state is in memory here.
TEST_F(NvmeParamTest, EachStepsTrafficIsThePredictedOne) {
  for (const int64_t accum : {1, 2}) {
    SCOPED_TRACE("grad_accum_steps " + std::to_string(accum));
    TrainConfig cfg = config("gpt2", "traffic" + std::to_string(accum));
    cfg.train.steps = 5;
    cfg.data.grad_accum_steps = accum;
    cfg.data.batch_size = 8 / accum;
    params_on_nvme(cfg);
    const std::vector<int64_t> region = regions(cfg);
    const int64_t sum = std::accumulate(region.begin(), region.end(), int64_t{0}), last = region.back();
    const std::vector<StepMetrics> steps = train_steps(cfg, world);
    ASSERT_EQ(steps.size(), 5u);
    for (size_t i = 0; i < steps.size(); ++i) {
      ASSERT_TRUE(steps[i].nvme.has_value()) << "step " << i + 1;
      const int64_t micro = 2 * sum - last;
      const int64_t read = i == 0 ? 2 * sum + (accum - 1) * micro : accum * micro;
      EXPECT_EQ(steps[i].nvme->read_bytes, read)
          << "step " << i + 1 << ": regions " << ::testing::PrintToString(region);
      EXPECT_EQ(steps[i].nvme->written_bytes, sum) << "step " << i + 1;
      EXPECT_GE(steps[i].nvme->wait_s, 0.0);
    }
  }
}

TEST_F(NvmeParamTest, AByteChangedInTheParametersFileEndsTheRunNamingTheFileAndOffset) {
  if (world->size() != 1) GTEST_SKIP() << "one rank: the fault is this process's";
  TrainConfig cfg = config("gpt2", "fault");
  cfg.train.steps = 8;
  params_on_nvme(cfg);
  std::string message, file_name;
  int64_t steps = 0;
  {
    auto t = train::Trainer::create(cfg, world);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    t.value()->show_progress = false;
    t.value()->on_step = [&](const StepMetrics&) {
      if (++steps != 3) return;
      // After step 3: a byte of the root part's region (the first) changes on the disk. The
      // backward of step 4 reads that region again.
      const fs::path file = open_tier_file(".parameters");
      ASSERT_FALSE(file.empty()) << "no open parameters' file under " << tier_dir();
      file_name = fs::read_symlink(file).filename().string();
      flip_byte(file, 100);
    };
    message = run_error(*t.value());
  }
  EXPECT_EQ(steps, 3) << "the run went on after the parameters' bytes changed";
  ASSERT_NE(file_name.find(".parameters"), std::string::npos) << file_name;
  // The link's name ends in " (deleted)": the file was unlinked once open.
  file_name = file_name.substr(0, file_name.find(' '));
  EXPECT_NE(message.find("the NVMe tier's file '" + (tier_dir() / file_name).string() + "'"), std::string::npos)
      << message;
  EXPECT_NE(message.find("at offset 0 are not what was written there"), std::string::npos) << message;
  EXPECT_TRUE(fs::is_empty(tier_dir()));
}

// On a device (the tests' emulated accelerator, whose kernels are the host's), the tier sits
// behind host memory (Note [The parameter tier behind a device]): each part's staged shard is
// copied into its block of the gathered buffer on the device and gathered in place, and the
// host's AdamW rounds the stepped masters into the tier's staging buffers, written to the disk.
// Against the device's ZeRO-3 with the optimizer's state in host memory (ZeRO-Offload), 8 steps'
// losses are equal bit for bit with the parameters on their tier (the optimizer's state in
// memory, fp32; on its own tier, bf16), the device allocates no parameter shard (kParameter:
// nothing, where the control holds the shard) and no optimizer state, the host's parameters'
// memory is the staging buffers, and the run's checkpoint at step 4 resumes to the same losses.
TEST_F(NvmeParamTest, OnADeviceTheTierSitsBehindHostMemory) {
  const Device device = testing::emulated_device();
  for (const std::string arch : {"gpt2", "llama"})
    for (const std::string dtype : {"fp32", "bf16"}) {
      SCOPED_TRACE(arch + " " + dtype + ", " + std::to_string(world->size()) + " ranks");
      TrainConfig cfg = config(arch, "device_" + arch + dtype);
      cfg.precision.dtype = dtype;
      cfg.train.steps = 8;
      const std::vector<int64_t> part_shards = shard_bytes(cfg);
      const int64_t shard = std::accumulate(part_shards.begin(), part_shards.end(), int64_t{0});
      const MeasuredRun memory = measured_run(cfg, device);
      ASSERT_EQ(memory.run.losses.size(), 8u);
      EXPECT_GE(memory.device_params.end, shard) << "the control holds the shard on the device";
      params_on_nvme(cfg);
      if (dtype == "bf16") optimizer_on_nvme(cfg);
      cfg.train.checkpoint_interval = 4;
      const MeasuredRun tier = measured_run(cfg, device);
      EXPECT_EQ(tier.run.losses, memory.run.losses);
      EXPECT_EQ(tier.device_params.peak, 0) << "parameter shard memory on the device";
      EXPECT_EQ(tier.device_state.peak, 0) << "optimizer state on the device";
      EXPECT_GT(tier.host_params.peak, 0) << "the staging buffers are counted as parameters";
      EXPECT_LE(tier.host_params.peak, staging_bound(cfg, cfg.parallel.nvme_prefetch_depth + 1));
      if (world->rank() == 0)
        std::printf("%s %s, %d ranks: shard %lld B; kParameter on the device %lld B in memory, peak %lld B on the "
                    "tier; on the host peak %lld B on the tier\n",
                    arch.c_str(), dtype.c_str(), world->size(), static_cast<long long>(shard),
                    static_cast<long long>(memory.device_params.end), static_cast<long long>(tier.device_params.peak),
                    static_cast<long long>(tier.host_params.peak));
      cfg.train.resume = true;  // from step 4, on the tiers again
      if (world->rank() == 0) fs::remove_all(fs::path(cfg.train.out_dir) / "step_000008");
      world->barrier();
      EXPECT_EQ(train(cfg, world, -1, device).losses,
                std::vector<double>(memory.run.losses.begin() + 4, memory.run.losses.end()))
          << "resumed from step 4";
      EXPECT_TRUE(fs::is_empty(tier_dir())) << "the tiers' files are scratch, out of the directory once open";
    }
}

TEST_F(NvmeParamTest, TheKeysAreChecked) {
  TrainConfig cfg = config("gpt2", "keys");
  params_on_nvme(cfg);
  const auto layout_error = [&] { return testing::error_of([&] { Trainer::check_layout(cfg, world->size()); }); };
  EXPECT_EQ(layout_error(), "") << "zero_stage 3 + offload_optimizer + nvme_path is a valid layout";
  cfg.parallel.zero_stage = 2;
  std::string e = layout_error();
  EXPECT_NE(e.find("parallel.offload_param = \"nvme\" keeps ZeRO-3's parameter shard on disk: it needs "
                   "parallel.zero_stage = 3 (got zero_stage = 2)"),
            std::string::npos)
      << e;
  cfg.parallel.zero_stage = 3;
  cfg.parallel.offload_optimizer = false;
  e = layout_error();
  EXPECT_NE(e.find("needs parallel.offload_optimizer = true"), std::string::npos) << e;
  cfg.parallel.offload_optimizer = true;
  cfg.parallel.nvme_path = "";
  e = layout_error();
  EXPECT_NE(e.find("parallel.offload_param = \"nvme\" needs parallel.nvme_path"), std::string::npos) << e;
  cfg.parallel.nvme_path = (dir / "no_such_directory").string();
  const auto create_error = [&](std::optional<Device> device) {
    return testing::error_of([&] {
      auto t = Trainer::create(cfg, world, device);
      if (!t.is_ok()) throw std::runtime_error(t.status().to_string());
    });
  };
  e = create_error(std::nullopt);
  EXPECT_NE(e.find("parallel.nvme_path = '" + cfg.parallel.nvme_path + "' is not a directory"), std::string::npos)
      << e;
  cfg.parallel.nvme_path = tier_dir().string();
  EXPECT_EQ(create_error(testing::emulated_device()), "") << "the tier runs behind a device";
}

}  // namespace
}  // namespace trident::train
