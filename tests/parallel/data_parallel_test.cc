// Data parallelism and ZeRO stages 1-3 under mpirun (1, 2 and 4 ranks, label mpi): the
// per-step losses equal the single-process run's on the same seed, init and global batch
// (within bf16/fp16's roundings under mixed precision),
// with and without gradient accumulation, for several bucket sizes and (ZeRO-3) with
// activation checkpointing; model-state memory
// per rank (from the allocator's categories) and elements handed to collectives per step
// match ZeRO's formulas; checkpoints resume on every rank, and under another rank count and
// stage. On a device (the emulated one: host kernels, collectives staged through host memory)
// every stage gives the host's losses bit for bit.
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_dir.h"
#include "comm/mpi_communicator.h"
#include "core/allocator.h"
#include "core/factory.h"
#include "support/emulated_device.h"
#include "support/mpi_training_test.h"
#include "support/tiny_run.h"
#include "train/stop_request.h"
#include "train/trainer.h"

namespace trident::train {
namespace {

namespace fs = std::filesystem;

class DataParallelTest : public testing::MpiTrainingTest {
 protected:
  TrainConfig config(const std::string& out) const {
    TrainConfig cfg = testing::tiny_run_config(dir);  // global batch 8: 8, 4 or 2 rows per rank
    cfg.data.sampler = "sequential";
    cfg.train.out_dir = (dir / out).string();
    return cfg;
  }

  // A few steps with one ZeRO stage and (almost) no evaluation.
  TrainConfig short_run(const std::string& name, int64_t stage, int64_t steps) const {
    TrainConfig cfg = config(name + std::to_string(stage));
    cfg.parallel.zero_stage = stage;
    cfg.train.steps = steps;
    cfg.train.eval_interval = 1000;
    cfg.train.eval_batches = 1;
    return cfg;
  }
};

// Note [Preemption]: a signal that reaches one rank only stops every rank at the same step
// boundary (no rank left in a collective), with a checkpoint; resuming gives the
// uninterrupted losses bit for bit. With ZeRO-2 every rank writes its shard.
TEST_F(DataParallelTest, ASignalToOneRankStopsEveryRankAtTheSameStep) {
  ScopedStopHandlers handlers;
  for (int64_t stage : {0, 2}) {
    TrainConfig cfg = short_run("stop", stage, 12);
    const Run straight = train(cfg, world);
    cfg.train.out_dir += "_stopped";
    const int signalled = world->size() - 1;
    clear_stop_signal();
    auto t = Trainer::create(cfg, world);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    std::vector<double> joined;
    t.value()->show_progress = false;
    t.value()->on_step = [&](const StepMetrics& m) {
      joined.push_back(m.loss);
      if (m.step == 5 && world->rank() == signalled) ::raise(SIGTERM);
    };
    ASSERT_TRUE(t.value()->run().is_ok());
    EXPECT_EQ(t.value()->step(), 5) << "rank " << world->rank();
    const std::string why = world->size() > 1 ? "SIGTERM received on rank " + std::to_string(signalled)
                                              : std::string("SIGTERM received");
    EXPECT_EQ(t.value()->stop_reason(), why);
    EXPECT_EQ(stop_signal(), world->rank() == signalled ? SIGTERM : 0);
    clear_stop_signal();
    t = Trainer::create(cfg, world);  // resumes from step 5
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    EXPECT_EQ(t.value()->step(), 5);
    t.value()->show_progress = false;
    t.value()->on_step = [&](const StepMetrics& m) { joined.push_back(m.loss); };
    ASSERT_TRUE(t.value()->run().is_ok());
    EXPECT_EQ(t.value()->stop_reason(), "");
    EXPECT_EQ(joined, straight.losses) << "ZeRO stage " << stage;
  }
}

// Evaluation is collective: a validation file that some ranks see and others do not is an
// error on every rank at start, not a hang at the first evaluation.
TEST_F(DataParallelTest, AValidationFileOnSomeRanksOnlyIsRefusedOnEveryRank) {
  if (world->size() == 1) GTEST_SKIP() << "needs two ranks";
  TrainConfig cfg = short_run("val_on_some", 0, 4);
  if (world->rank() == 1) cfg.data.val_file = (dir / "not_on_this_host.bin").string();
  auto t = Trainer::create(cfg, world);
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("exists on some ranks' hosts and not on others"), std::string::npos)
      << t.status().message();
}

TEST_F(DataParallelTest, LossesEqualTheSingleProcessRun) {
  for (int64_t stage : {0, 1, 2, 3})
  for (int64_t accum : {1, 2}) {
    for (double bucket_mb : {25.0, 0.01}) {  // one bucket; several
      if (stage == 3 && bucket_mb != 25.0) continue;  // ZeRO-3's buckets are the model's parts
      TrainConfig cfg = config("dp_" + std::to_string(stage) + "_" + std::to_string(accum) + "_" +
                               std::to_string(bucket_mb));
      cfg.data.grad_accum_steps = accum;
      cfg.parallel.bucket_mb = bucket_mb;
      cfg.parallel.zero_stage = stage;
      cfg.train.checkpoint_interval = 1000;
      TrainConfig single = cfg;
      single.parallel.zero_stage = 0;
      single.train.out_dir += "_single_rank" + std::to_string(world->rank());
      const Run ref = train(single, nullptr);
      const Run dp = train(cfg, world);
      const std::string what = std::to_string(world->size()) + " ranks, ZeRO stage " + std::to_string(stage) +
                               ", accum " + std::to_string(accum) +
                               ", bucket " + std::to_string(bucket_mb) + " MiB";
      expect_close(dp.losses, ref.losses, what + " (train loss)");
      expect_close(dp.val, ref.val, what + " (val loss)");
    }
  }
}

// Data parallelism and ZeRO with the model on a device: buckets, flat buffers and shards live
// on the device, the collectives stage them through host memory, and the losses are the host
// run's bit for bit (the emulated device computes with the host's kernels). On GPUs the same
// code runs over NCCL.
TEST_F(DataParallelTest, OnADeviceEveryStageGivesTheHostLossesBitForBit) {
  const Device device = testing::emulated_device();
  for (int64_t stage : {0, 1, 2, 3}) {
    TrainConfig cfg = config("device_" + std::to_string(stage));
    cfg.data.grad_accum_steps = 2;
    cfg.parallel.zero_stage = stage;
    cfg.parallel.bucket_mb = stage == 3 ? 25.0 : 0.01;  // several buckets in flight
    cfg.train.steps = 6;
    cfg.train.eval_interval = 3;
    cfg.train.checkpoint_interval = 3;
    const Run host = train(cfg, world);
    cfg.train.out_dir += "_on_device";
    const Run on_device = train(cfg, world, -1, device);
    const std::string what = std::to_string(world->size()) + " ranks, ZeRO stage " + std::to_string(stage);
    EXPECT_EQ(on_device.losses, host.losses) << what;
    EXPECT_EQ(on_device.val, host.val) << what;
    ASSERT_EQ(on_device.losses.size(), 6u) << what;
    // The checkpoint written from device tensors resumes (on the device) to the same losses.
    cfg.train.resume = true;
    if (world->rank() == 0) fs::remove_all(fs::path(cfg.train.out_dir) / "step_000006");
    world->barrier();
    auto resumed = Trainer::create(cfg, world, device);
    ASSERT_TRUE(resumed.is_ok()) << resumed.status().to_string();
    EXPECT_EQ(resumed.value()->step(), 3) << what;
    std::vector<double> rest;
    resumed.value()->show_progress = false;
    resumed.value()->on_step = [&](const StepMetrics& m) { rest.push_back(m.loss); };
    ASSERT_TRUE(resumed.value()->run().is_ok());
    EXPECT_EQ(rest, std::vector<double>(host.losses.begin() + 3, host.losses.end())) << what << " (resumed)";
  }
}

// ZeRO with bf16 on a device: the masters' shards, the bf16 flat parameters and their gathers
// live on the device, and the losses are the host run's bit for bit.
TEST_F(DataParallelTest, OnADeviceZeroWithBf16GivesTheHostLossesBitForBit) {
  for (int64_t stage : {1, 3}) {
    TrainConfig cfg = config("device_bf16_" + std::to_string(stage));
    cfg.precision.dtype = "bf16";
    cfg.data.grad_accum_steps = 2;
    cfg.parallel.zero_stage = stage;
    cfg.parallel.bucket_mb = stage == 3 ? 25.0 : 0.01;
    cfg.train.steps = 6;
    cfg.train.eval_interval = 3;
    cfg.train.checkpoint_interval = 1000;
    expect_device_run_equals_host(cfg, std::to_string(world->size()) + " ranks, bf16, ZeRO stage " +
                                           std::to_string(stage));
  }
}

// ZeRO-Offload across ranks (DeepSpeed's ZeRO-Offload is ZeRO-2 plus this): each rank's
// shard of the fp32 masters and AdamW's moments live in host memory and step there, while the
// model, its gradients and the collectives stay on the device. The losses are those of ZeRO
// with everything on the device, bit for bit, and the device holds no optimizer state.
TEST_F(DataParallelTest, OnADeviceZeroOffloadKeepsTheOptimizerOnTheHost) {
  const Device device = testing::emulated_device();
  for (const std::string dtype : {"fp32", "bf16", "fp16"})  // fp16: the loss scale is divided out on the host
    for (int64_t stage : {1, 2, 3}) {
      TrainConfig cfg = config("offload_" + dtype + std::to_string(stage));
      cfg.precision.dtype = dtype;
      cfg.data.grad_accum_steps = 2;
      cfg.parallel.zero_stage = stage;
      cfg.parallel.bucket_mb = stage == 3 ? 25.0 : 0.01;
      cfg.train.steps = 6;
      cfg.train.eval_interval = 3;
      cfg.train.checkpoint_interval = 3;
      const Run on_device = train(cfg, world, -1, device);
      cfg.parallel.offload_optimizer = true;
      cfg.train.out_dir += "_offloaded";
      device_allocator(device.type)->reset_peak_stats();
      const MemoryStats before = device_allocator(device.type)->stats();
      const Run offloaded = train(cfg, world, -1, device);
      const MemoryStats after = device_allocator(device.type)->stats();
      const std::string what = std::to_string(world->size()) + " ranks, " + dtype + ", ZeRO stage " + std::to_string(stage);
      ASSERT_EQ(offloaded.losses.size(), 6u) << what;
      EXPECT_EQ(offloaded.losses, on_device.losses) << what;
      EXPECT_EQ(offloaded.val, on_device.val) << what;
      EXPECT_EQ(after.category(MemoryCategory::kOptimizerState).peak,
                before.category(MemoryCategory::kOptimizerState).current)
          << what << ": optimizer state was allocated on the device";
      if (stage == 2) {  // the checkpoint of the host shards resumes to the same losses
        cfg.train.resume = true;
        if (world->rank() == 0) fs::remove_all(fs::path(cfg.train.out_dir) / "step_000006");
        world->barrier();
        const Run rest = train(cfg, world, -1, device);
        EXPECT_EQ(rest.losses, std::vector<double>(on_device.losses.begin() + 3, on_device.losses.end()))
            << what << " (resumed)";
      }
    }
}

// bf16 and fp16 (loss scaling) with data parallelism: the fp32 masters' gradients are what the
// ranks average. Each rank's backward rounds its own rows' gradients to bf16/f16 before they
// reach the masters, where one process rounds the whole batch's, so the runs agree to those
// roundings rather than to fp32's 1e-5: within 1e-3 relative (measured: about 3e-5 over 20
// steps on 2 ranks), against the 10-20% the losses fall over the run.
TEST_F(DataParallelTest, MixedPrecisionLossesFollowTheSingleProcessRun) {
  for (const std::string dtype : {"bf16", "fp16"})
    for (int64_t accum : {1, 2}) {
      TrainConfig cfg = config("mixed_" + dtype + "_" + std::to_string(accum));
      cfg.precision.dtype = dtype;
      cfg.data.grad_accum_steps = accum;
      cfg.parallel.bucket_mb = 0.01;
      cfg.train.checkpoint_interval = 1000;
      TrainConfig single = cfg;
      single.train.out_dir += "_single_rank" + std::to_string(world->rank());
      const Run ref = train(single, nullptr);
      const Run dp = train(cfg, world);
      const std::string what = std::to_string(world->size()) + " ranks, " + dtype + ", accum " + std::to_string(accum);
      ASSERT_EQ(dp.losses.size(), ref.losses.size()) << what;
      for (size_t i = 0; i < ref.losses.size(); ++i)
        EXPECT_NEAR(dp.losses[i], ref.losses[i], 1e-3 * std::abs(ref.losses[i])) << what << ", step " << i + 1;
      EXPECT_LT(dp.losses.back(), dp.losses.front() - 0.1) << what << ": it trains";
      if (world->size() == 1) {
        EXPECT_EQ(dp.losses, ref.losses) << what << ": one rank is the single process";
      }
    }
}

// ZeRO with bf16/fp16: the optimizer keeps each rank's shard of the fp32 masters, reduces the
// gradients in fp32 and rounds the updated shard into the compute-dtype parameters before
// gathering them. Against one process with fp32 masters (MasterWeights) the runs agree to the
// roundings of each rank's own rows' gradients, as data parallelism does (within 1e-3).
TEST_F(DataParallelTest, ZeroWithMixedPrecisionFollowsTheSingleProcessRun) {
  for (const std::string dtype : {"bf16", "fp16"}) {
    TrainConfig single = config("zero_mixed_single_" + dtype + "_rank" + std::to_string(world->rank()));
    single.precision.dtype = dtype;
    single.data.grad_accum_steps = 2;
    single.train.checkpoint_interval = 1000;
    const Run ref = train(single, nullptr);
    for (int64_t stage : {1, 2, 3}) {
      if (dtype == "fp16" && stage != 2) continue;  // fp16's own path is the loss scale (below)
      TrainConfig cfg = single;
      cfg.train.out_dir = (dir / ("zero_mixed_" + dtype + std::to_string(stage))).string();
      cfg.parallel.zero_stage = stage;
      cfg.parallel.bucket_mb = stage == 3 ? 25.0 : 0.01;  // several buckets in flight
      const Run zero = train(cfg, world);
      const std::string what = std::to_string(world->size()) + " ranks, " + dtype + ", ZeRO stage " +
                               std::to_string(stage);
      ASSERT_EQ(zero.losses.size(), ref.losses.size()) << what;
      for (size_t i = 0; i < ref.losses.size(); ++i)
        EXPECT_NEAR(zero.losses[i], ref.losses[i], 1e-3 * std::abs(ref.losses[i])) << what << ", step " << i + 1;
      ASSERT_EQ(zero.val.size(), ref.val.size()) << what;
      for (size_t i = 0; i < ref.val.size(); ++i)
        EXPECT_NEAR(zero.val[i], ref.val[i], 1e-3 * std::abs(ref.val[i])) << what << ", evaluation " << i + 1;
      EXPECT_LT(zero.losses.back(), zero.losses.front() - 0.1) << what << ": it trains";
    }
  }
}

// fp16 under ZeRO with a loss scale far too large: the first steps overflow on every rank
// (the norm of the reduced shards is all-reduced), so each is skipped and the scale backs off
// as in one process; the steps after train normally.
TEST_F(DataParallelTest, ZeroFp16SkipsOverflowingStepsAsOneProcessDoes) {
  TrainConfig single = config("zero_overflow_single_rank" + std::to_string(world->rank()));
  force_fp16_overflows(single);
  single.train.checkpoint_interval = 1000;
  const std::vector<StepMetrics> ref = train_steps(single, nullptr);
  for (int64_t stage : {2, 3}) {
    TrainConfig cfg = single;
    cfg.train.out_dir = (dir / ("zero_overflow" + std::to_string(stage))).string();
    cfg.parallel.zero_stage = stage;
    expect_same_skips(train_steps(cfg, world), ref, std::to_string(world->size()) + " ranks, ZeRO stage " +
                                                        std::to_string(stage));
  }
}

// A bf16 ZeRO-2 checkpoint holds the fp32 masters: resumed under the same layout it gives the
// uninterrupted run's losses bit for bit, and one process without ZeRO (fp32 masters of its
// own) continues it within bf16's tolerance.
TEST_F(DataParallelTest, ZeroMixedPrecisionCheckpointsHoldTheMasters) {
  TrainConfig cfg = config("zero_bf16_straight");
  cfg.precision.dtype = "bf16";
  cfg.parallel.zero_stage = 2;
  cfg.train.checkpoint_interval = 1000;
  const Run straight = train(cfg, world);
  cfg.train.out_dir = (dir / "zero_bf16_resumed").string();
  cfg.train.checkpoint_interval = 10;
  const Run a = train(cfg, world, 10);
  if (world->rank() == 0) fs::copy(dir / "zero_bf16_resumed", dir / "zero_bf16_single", fs::copy_options::recursive);
  world->barrier();
  const Run b = train(cfg, world);
  std::vector<double> joined = a.losses;
  joined.insert(joined.end(), b.losses.begin(), b.losses.end());
  EXPECT_EQ(joined, straight.losses) << world->size() << " ranks: resumed ZeRO-2 bf16";
  if (world->rank() == 0) {
    auto reader = checkpoint::CheckpointReader::open(checkpoint::default_env(),
                                                     (dir / "zero_bf16_resumed" / "step_000010").string());
    ASSERT_TRUE(reader.is_ok()) << reader.status().to_string();
    auto w = reader.value().load_tensor("h.0.attn.c_attn.weight");
    ASSERT_TRUE(w.is_ok()) << w.status().to_string();
    EXPECT_EQ(w.value().dtype(), DType::kF32) << "the masters, not the bf16 parameters";
    TrainConfig single = cfg;
    single.parallel.zero_stage = 0;
    single.train.out_dir = (dir / "zero_bf16_single").string();
    const Run c = train(single, nullptr);
    ASSERT_EQ(c.losses.size(), 10u);
    for (size_t i = 0; i < c.losses.size(); ++i)
      EXPECT_NEAR(c.losses[i], straight.losses[10 + i], 1e-3 * std::abs(straight.losses[10 + i]))
          << "one process from the ZeRO-2 checkpoint, step " << 11 + i;
  }
  world->barrier();
}

// ZeRO-3 gathers each block's parameters again for its backward (its forward freed them):
// with activation checkpointing the rerun of a block's forward inside its backward finds them
// gathered, and the losses are still the single-process run's.
TEST_F(DataParallelTest, Zero3WithActivationCheckpointingEqualsTheSingleProcessRun) {
  for (const char* mode : {"selective", "full"}) {
    TrainConfig cfg = config(std::string("z3_ckpt_") + mode);
    cfg.parallel.zero_stage = 3;
    cfg.data.grad_accum_steps = 2;
    cfg.model.activation_checkpointing = mode;
    cfg.train.checkpoint_interval = 1000;
    TrainConfig single = cfg;
    single.parallel.zero_stage = 0;
    single.model.activation_checkpointing = "none";
    single.train.out_dir += "_single_rank" + std::to_string(world->rank());
    const Run ref = train(single, nullptr);
    const Run z3 = train(cfg, world);
    const std::string what = std::to_string(world->size()) + " ranks, ZeRO-3, activation checkpointing " + mode;
    expect_close(z3.losses, ref.losses, what + " (train loss)");
    expect_close(z3.val, ref.val, what + " (val loss)");
  }
}

// Model states per rank after two steps, from the allocator's categories (bytes), against
// ZeRO's fp32 Adam formulas: stage 0 16P, stage 1 8P + 8P/N, stage 2 4P + 12P/N, stage 3
// 16P/N. With bf16 parameters (fp32 gradients, and fp32 masters beside m and v): stage 0 2P +
// 16P (fp32 masters and their gradients), stage 1 2P + 4P + 12P/N, stage 2 2P + 16P/N, stage 3
// 18P/N. ZeRO-3's gathered parameters are freed after each use (none are held after a
// step); at their peak they are the root part plus two blocks (the running one and the
// prefetched one), a third of this 6-layer model.
TEST_F(DataParallelTest, ModelStateMemoryFollowsTheZeroFormulas) {
  const double N = world->size();
  for (const std::string dtype : {"fp32", "bf16"})
  for (int64_t stage : {0, 1, 2, 3}) {
    TrainConfig cfg = short_run("mem_" + dtype + "_", stage, 2);
    cfg.precision.dtype = dtype;
    cfg.model.n_layer = 6;  // so that the root and two blocks are a fraction of the model
    host_allocator().reset_peak_stats();
    const MemoryStats before = host_allocator().stats();
    double P = 0;
    MemoryStats after;
    {
      auto t = Trainer::create(cfg, world);
      ASSERT_TRUE(t.is_ok()) << t.status().to_string();
      t.value()->show_progress = false;
      ASSERT_TRUE(t.value()->run().is_ok());
      P = static_cast<double>(t.value()->model().num_parameters());
      after = host_allocator().stats();
    }
    auto held = [&](MemoryCategory c) {
      return static_cast<double>(after.category(c).current - before.category(c).current);
    };
    const double states = held(MemoryCategory::kParameter) + held(MemoryCategory::kGradient) +
                          held(MemoryCategory::kOptimizerState);
    const double want = dtype == "fp32" ? (stage == 0   ? 16 * P
                                           : stage == 1 ? 8 * P + 8 * P / N
                                           : stage == 2 ? 4 * P + 12 * P / N
                                                        : 16 * P / N)
                                        : (stage == 0   ? 18 * P
                                           : stage == 1 ? 6 * P + 12 * P / N
                                           : stage == 2 ? 2 * P + 16 * P / N
                                                        : 18 * P / N);
    if (world->rank() == 0)
      std::printf("%s, ZeRO stage %lld, %g ranks: model states %.0f B = %.3f P bytes (formula %.3f P)\n",
                  dtype.c_str(), static_cast<long long>(stage), N, states, states / P, want / P);
    EXPECT_NEAR(states, want, 0.05 * want)
        << dtype << ", stage " << stage << ", " << N << " ranks: params " << held(MemoryCategory::kParameter) << " B, grads "
        << held(MemoryCategory::kGradient) << " B, optimizer " << held(MemoryCategory::kOptimizerState) << " B; P = "
        << P;
    const MemoryStats::Counter& gathered = after.category(MemoryCategory::kGatheredParameter);
    EXPECT_EQ(gathered.current, before.category(MemoryCategory::kGatheredParameter).current)
        << "gathered parameters still held after the steps";
    if (stage == 3 && dtype == "fp32") {
      // The root (embeddings, ln_f) and two blocks, each padded to a multiple of N.
      const models::ModelConfig& m = cfg.model;
      const double C = static_cast<double>(m.n_embd);
      const double root = static_cast<double>(m.vocab_size + m.block_size) * C + 2 * C;
      const double block = 12 * C * C + 13 * C;
      const double bound = 4 * (root + 2 * block + 3 * N);
      if (world->rank() == 0)
        std::printf("ZeRO stage 3, %g ranks: peak gathered parameters %lld B = %.3f P bytes (root + 2 blocks: %.3f P)\n",
                    N, static_cast<long long>(gathered.peak), static_cast<double>(gathered.peak) / P, bound / P);
      EXPECT_LE(static_cast<double>(gathered.peak), bound);
      EXPECT_GT(gathered.peak, 0);
    }
  }
}

// Per step (accumulation 1): stage 0 all-reduces P elements; stages 1-2 reduce-scatter P and
// all-gather P (each counted at its full size); stage 3 reduce-scatters P and all-gathers 2P
// (every part once for its forward, once for its backward); nothing else but scalars.
TEST_F(DataParallelTest, ElementsHandedToCollectivesPerStep) {
  if (world->size() == 1) GTEST_SKIP() << "one process communicates nothing";
  for (int64_t stage : {0, 1, 2, 3}) {
    TrainConfig cfg = short_run("comm", stage, 3);
    cfg.parallel.bucket_mb = 0.01;
    auto t = Trainer::create(cfg, world);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    t.value()->show_progress = false;
    const double P = static_cast<double>(t.value()->model().num_parameters());
    world->reset_stats();
    ASSERT_TRUE(t.value()->run(2).is_ok());  // two steps
    const comm::CommStats& s = world->stats();
    const double ar = static_cast<double>(s.of(comm::CommOp::kAllReduce).elements);
    const double rs = static_cast<double>(s.of(comm::CommOp::kReduceScatter).elements);
    const double ag = static_cast<double>(s.of(comm::CommOp::kAllGather).elements);
    if (stage == 0) {
      EXPECT_NEAR(ar, 2 * P, 0.05 * 2 * P);
      EXPECT_EQ(rs + ag, 0);
    } else {
      EXPECT_NEAR(rs, 2 * P, 0.05 * 2 * P) << "stage " << stage;
      const double gathers = stage == 3 ? 4 * P : 2 * P;
      EXPECT_NEAR(ag, gathers, 0.05 * gathers) << "stage " << stage;
      // Per step: the boundary's 2 and the all-ranks check's 1, and the loss with whether any
      // rank has auxiliary values (Note [Auxiliary values over ranks] in train/trainer.cc): 2.
      // Per run: whether rank 0 took the out_dir lock (Note [The out_dir lock]): 1.
      EXPECT_LE(ar, 11) << "stage " << stage << ": only scalars (loss, gradient norm) are all-reduced";
    }
  }
}

// train.profile_step (train/step_profile.h) with several ranks: each rank writes its own
// profile, whose collectives (data parallel's all-reduce, ZeRO's reduce-scatter and
// all-gather) are rows of phase communication.
TEST_F(DataParallelTest, EveryRankWritesItsOwnStepProfile) {
  for (int64_t stage : {0, 2}) {
    TrainConfig cfg = short_run("profile", stage, 3);
    cfg.train.profile_step = 2;
    train(cfg, world);
    const std::string path = cfg.train.out_dir + "/profile_step2" +
                             (world->rank() == 0 ? std::string() : ".rank" + std::to_string(world->rank())) + ".json";
    std::ifstream in(path);
    ASSERT_TRUE(in.good()) << path;
    const nlohmann::json j = nlohmann::json::parse(in);
    EXPECT_EQ(j["rank"], world->rank());
    EXPECT_EQ(j["world_size"], world->size());
    std::set<std::string> comm_rows;
    for (const auto& row : j["rows"])
      if (row["phase"] == "communication") comm_rows.insert(row["name"].get<std::string>());
    const std::vector<std::string> expected =
        stage == 0 ? std::vector<std::string>{"dp.all_reduce"} : std::vector<std::string>{"zero.reduce_scatter", "zero.all_gather"};
    for (const std::string& name : expected) EXPECT_TRUE(comm_rows.count(name)) << name << " on rank " << world->rank();
    EXPECT_GT(j["phases"]["communication"].get<double>(), 0.0);
  }
}

// 10 steps on every rank with ZeRO-2 and a checkpoint; then 10 more on half the ranks (a
// sub-communicator) with ZeRO-3, and on half with ZeRO-1: the 20 losses are the
// single-process run's.
TEST_F(DataParallelTest, ZeroCheckpointsReshardToAnotherRankCountAndStage) {
  TrainConfig single = config("reshard_single_rank" + std::to_string(world->rank()));
  const Run straight = train(single, nullptr);
  TrainConfig first = config("reshard");
  first.parallel.zero_stage = 2;
  first.train.checkpoint_interval = 10;
  const Run a = train(first, world, 10);
  const int half = std::max(1, world->size() / 2);
  std::shared_ptr<comm::Communicator> group = world->split(world->rank() < half ? 0 : 1, world->rank());
  for (int64_t stage : {3, 1}) {
    // Each resume from its own copy of the step-10 checkpoint.
    const std::string copy = "reshard_to_zero" + std::to_string(stage);
    if (world->rank() == 0) fs::copy(dir / "reshard", dir / copy, fs::copy_options::recursive);
    world->barrier();
    if (world->rank() < half) {
      TrainConfig second = config(copy);
      second.parallel.zero_stage = stage;
      const Run b = train(second, group);
      std::vector<double> joined = a.losses;
      joined.insert(joined.end(), b.losses.begin(), b.losses.end());
      expect_close(joined, straight.losses, "ZeRO-2 on " + std::to_string(world->size()) + " ranks, then ZeRO-" +
                                                std::to_string(stage) + " on " + std::to_string(half));
    }
    world->barrier();
  }
}

// ZeRO checkpoints are written by every rank at once: one file per rank holding that rank's
// partition (about 1/N of the bytes), every tensor covered exactly once (the manifest
// validates it), and a single process without ZeRO loads the same weights from them.
TEST_F(DataParallelTest, ZeroCheckpointsAreShardedAcrossTheRanks) {
  for (int64_t stage : {1, 3}) {
    TrainConfig cfg = short_run("sharded", stage, 2);
    cfg.train.checkpoint_interval = 2;
    train(cfg, world);
    world->barrier();
    if (world->rank() != 0) continue;
    const std::string ckpt = cfg.train.out_dir + "/step_000002";
    auto reader = checkpoint::CheckpointReader::open(checkpoint::default_env(), ckpt);
    ASSERT_TRUE(reader.is_ok()) << reader.status().to_string();
    const checkpoint::Manifest& m = reader.value().manifest();
    EXPECT_EQ(m.find_file("model.safetensors"), nullptr) << "stage " << stage;
    double total = 0;
    std::vector<double> sizes;
    for (int r = 0; r < world->size(); ++r) {
      char name[64];
      std::snprintf(name, sizeof name, "shard.rank%05d.safetensors", r);
      const checkpoint::ManifestFile* f = m.find_file(name);
      ASSERT_NE(f, nullptr) << name << " is not in the manifest";
      sizes.push_back(static_cast<double>(f->size));
      total += static_cast<double>(f->size);
    }
    for (double size : sizes) EXPECT_NEAR(size, total / world->size(), 0.1 * total / world->size() + 4096);
    // Every parameter and both AdamW moments, each in pieces from every rank that owns part of it.
    TrainConfig single = config("sharded_single");
    single.train.steps = 2;
    auto t = Trainer::create(single, nullptr);
    ASSERT_TRUE(t.is_ok());
    for (const auto& [name, p] : t.value()->model().named_parameters()) {
      for (const std::string& logical : {name, name + ".exp_avg", name + ".exp_avg_sq"}) {
        ASSERT_TRUE(m.tensors.contains(logical)) << logical;
        for (const checkpoint::TensorShard& shard : m.tensors.find(logical)->second.shards)
          EXPECT_EQ(shard.kind, checkpoint::TensorShard::Kind::kFlat) << logical;
      }
    }
    ASSERT_TRUE(t.value()->load_checkpoint(ckpt).is_ok());
    EXPECT_EQ(t.value()->step(), 2);
  }
  world->barrier();
}

TEST_F(DataParallelTest, Rank0CheckpointsResumeOnEveryRank) {
  TrainConfig cfg = config("resume");
  const Run straight = train(cfg, world);
  TrainConfig first = config("resumed");
  first.train.checkpoint_interval = 10;
  const Run a = train(first, world, 10);
  const Run b = train(config("resumed"), world);
  std::vector<double> joined = a.losses;
  joined.insert(joined.end(), b.losses.begin(), b.losses.end());
  ASSERT_EQ(joined.size(), straight.losses.size());
  for (size_t i = 0; i < joined.size(); ++i) EXPECT_EQ(joined[i], straight.losses[i]) << "step " << i + 1;
}

TEST_F(DataParallelTest, AGlobalBatchThatDoesNotSplitIsAClearError) {
  if (world->size() == 1) GTEST_SKIP();
  TrainConfig cfg = config("bad");
  cfg.data.batch_size = 4 * world->size() + 1;
  try {
    auto t = Trainer::create(cfg, world);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data.batch_size (" + std::to_string(cfg.data.batch_size) + ")"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace trident::train
