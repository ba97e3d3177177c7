// Pipeline parallelism and the composed dp x tp x pp mesh under mpirun (1, 2, 4 and 8 ranks,
// label mpi): every layout the rank count allows, with the GPipe, 1F1B and interleaved
// schedules, ZeRO-1, sequence parallelism and activation checkpointing, trains with the
// per-step losses of the single-process run on the same seed, init and global batch; a
// checkpoint saved under one layout resumes under others and in one process. On a device (the
// emulated one) the layouts give the host's losses bit for bit.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "support/emulated_device.h"
#include "support/late_completing_communicator.h"
#include "support/mpi_training_test.h"
#include "support/order_matched_communicator.h"
#include "support/tiny_run.h"
#include "train/trainer.h"

namespace trident::train {
namespace {

namespace fs = std::filesystem;

struct Layout {
  int64_t dp, tp, pp;
  std::string schedule = "1f1b";
  int64_t virtual_stages = 1;
  int64_t zero_stage = 0;
  bool sequence_parallel = false;
  std::string activation_checkpointing = "none";
  std::string str() const {
    return "dp " + std::to_string(dp) + " x tp " + std::to_string(tp) + " x pp " + std::to_string(pp) + " (" + schedule +
           (virtual_stages > 1 ? ", " + std::to_string(virtual_stages) + " virtual stages" : "") + ", ZeRO " +
           std::to_string(zero_stage) + (sequence_parallel ? ", sequence parallel" : "") +
           (activation_checkpointing != "none" ? ", checkpointing " + activation_checkpointing : "") + ")";
  }
};

class PipelineTest : public testing::MpiTrainingTest {
 protected:
  // The tiny run with 4 layers and 4 heads; 4 micro-batches of 8 rows per step; 10 steps.
  TrainConfig config(const std::string& out) const {
    TrainConfig cfg = testing::tiny_run_config(dir);
    cfg.model.n_layer = 4;
    cfg.model.n_head = 4;
    cfg.data.sampler = "sequential";
    cfg.data.grad_accum_steps = 4;
    cfg.train.steps = 10;
    cfg.train.eval_interval = 5;
    cfg.train.checkpoint_interval = 1000;
    cfg.train.out_dir = (dir / out).string();
    return cfg;
  }
  static void apply(const Layout& l, TrainConfig& cfg) {
    cfg.parallel.tp = l.tp;
    cfg.parallel.pp = l.pp;
    cfg.parallel.pipeline_schedule = l.schedule;
    cfg.parallel.virtual_stages = l.virtual_stages;
    cfg.parallel.zero_stage = l.zero_stage;
    cfg.parallel.sequence_parallel = l.sequence_parallel;
    cfg.model.activation_checkpointing = l.activation_checkpointing;
  }
  // The layouts of this many ranks that the test runs.
  std::vector<Layout> layouts() const {
    switch (world->size()) {
      case 2:
        return {{1, 1, 2, "1f1b"}, {1, 1, 2, "gpipe"}, {1, 1, 2, "interleaved", 2}, {1, 1, 2, "1f1b", 1, 1},
                {1, 1, 2, "1f1b", 1, 0, false, "full"}};
      case 4:
        return {{2, 1, 2, "1f1b", 1, 1}, {1, 2, 2, "1f1b", 1, 0, true}, {1, 1, 4, "1f1b"}, {2, 1, 2, "interleaved", 2},
                {1, 2, 2, "gpipe", 1, 1}};
      case 8:
        return {{2, 2, 2, "1f1b", 1, 1}, {2, 2, 2, "interleaved", 2, 1, true}, {1, 2, 4, "1f1b"}};
      default:
        return {};
    }
  }
};

TEST_F(PipelineTest, LossesEqualTheSingleProcessRun) {
  if (layouts().empty()) GTEST_SKIP() << "no pipeline layouts on " << world->size() << " rank(s)";
  TrainConfig single = config("single_rank" + std::to_string(world->rank()));
  const Run ref = train(single, nullptr);
  int k = 0;
  for (const Layout& l : layouts()) {
    TrainConfig cfg = config("layout" + std::to_string(k++));
    apply(l, cfg);
    const Run got = train(cfg, world);
    if (world->rank() == 0) std::printf("%s: final loss %.6f (one process %.6f)\n", l.str().c_str(), got.losses.back(),
                                        ref.losses.back());
    expect_close(got.losses, ref.losses, l.str() + " (train loss)");
    expect_close(got.val, ref.val, l.str() + " (val loss)");
  }
}

// bf16 and fp16 through every layout: activations and their gradients travel in the compute
// dtype, each stage keeps fp32 masters of its own parameters (or ZeRO-1 their shards), and the
// head's wte gradient comes back to rank 0 in fp32. The runs agree with one process to bf16's
// roundings (within 1e-3 relative); fp16's overflow decision is every rank's.
TEST_F(PipelineTest, MixedPrecisionFollowsTheSingleProcessRun) {
  if (layouts().empty()) GTEST_SKIP() << "no pipeline layouts on " << world->size() << " rank(s)";
  for (const std::string dtype : {"bf16", "fp16"}) {
    TrainConfig single = config("mixed_single_" + dtype + "_rank" + std::to_string(world->rank()));
    single.precision.dtype = dtype;
    const Run ref = train(single, nullptr);
    int k = 0;
    for (const Layout& l : layouts()) {
      if (dtype == "fp16" && k > 0) break;  // one fp16 layout: the loss scale's path
      if (world->size() == 8 && k > 1) break;  // 8 ranks on this machine's cores are slow
      TrainConfig cfg = single;
      cfg.train.out_dir = (dir / ("mixed_" + dtype + std::to_string(k++))).string();
      apply(l, cfg);
      const Run got = train(cfg, world);
      const std::string what = dtype + ", " + l.str();
      ASSERT_EQ(got.losses.size(), ref.losses.size()) << what;
      double worst = 0;
      for (size_t i = 0; i < ref.losses.size(); ++i) {
        EXPECT_NEAR(got.losses[i], ref.losses[i], 1e-3 * std::abs(ref.losses[i])) << what << ", step " << i + 1;
        worst = std::max(worst, std::abs(got.losses[i] - ref.losses[i]) / std::abs(ref.losses[i]));
      }
      ASSERT_EQ(got.val.size(), ref.val.size()) << what;
      for (size_t i = 0; i < ref.val.size(); ++i)
        EXPECT_NEAR(got.val[i], ref.val[i], 1e-3 * std::abs(ref.val[i])) << what << ", evaluation " << i + 1;
      if (world->rank() == 0) std::printf("%s: largest relative loss difference %.2e\n", what.c_str(), worst);
    }
  }
}

// fp16 with overflowing steps through the first two layouts: each stage finds an overflow
// in its own parameters' gradients, and every rank skips the same steps as one process.
TEST_F(PipelineTest, Fp16SkipsOverflowingStepsAsOneProcessDoes) {
  if (layouts().empty()) GTEST_SKIP() << "no pipeline layouts on " << world->size() << " rank(s)";
  TrainConfig single = config("overflow_single_rank" + std::to_string(world->rank()));
  force_fp16_overflows(single);
  const std::vector<StepMetrics> ref = train_steps(single, nullptr);
  const std::vector<Layout> all = layouts();
  for (size_t k = 0; k < std::min<size_t>(2, all.size()); ++k) {
    TrainConfig cfg = single;
    cfg.train.out_dir = (dir / ("overflow" + std::to_string(k))).string();
    apply(all[k], cfg);
    expect_same_skips(train_steps(cfg, world), ref, "fp16, " + all[k].str());
  }
}

// bf16 through the first layout on a device: bf16 activations and their gradients travel from
// device memory, the head's fp32 wte gradient too, and the losses are the host run's bit for
// bit.
TEST_F(PipelineTest, OnADeviceBf16GivesTheHostLossesBitForBit) {
  if (layouts().empty()) GTEST_SKIP() << "no pipeline layouts on " << world->size() << " rank(s)";
  TrainConfig cfg = config("device_bf16");
  cfg.precision.dtype = "bf16";
  apply(layouts().front(), cfg);
  cfg.train.steps = 4;
  cfg.train.eval_interval = 2;
  expect_device_run_equals_host(cfg, "bf16, " + layouts().front().str());
}

// Every layout with the model on a device: activations and their gradients travel between the
// stages from device memory (staged through the host here, NCCL on GPUs), and the losses are
// the host run's bit for bit.
TEST_F(PipelineTest, OnADeviceLayoutsGiveTheHostLossesBitForBit) {
  if (layouts().empty()) GTEST_SKIP() << "no pipeline layouts on " << world->size() << " rank(s)";
  int k = 0;
  for (const Layout& l : layouts()) {
    TrainConfig cfg = config("device_layout" + std::to_string(k++));
    apply(l, cfg);
    cfg.train.steps = 4;
    cfg.train.eval_interval = 2;
    const Run host = train(cfg, world);
    cfg.train.out_dir += "_on_device";
    const Run on_device = train(cfg, world, -1, testing::emulated_device());
    ASSERT_EQ(host.losses.size(), 4u) << l.str();
    EXPECT_EQ(on_device.losses, host.losses) << l.str();
    EXPECT_EQ(on_device.val, host.val) << l.str();
  }
}

// ZeRO-Offload under pipelines (ZeRO 1, bf16): the optimizer on the host gives the losses of
// the optimizer on the device bit for bit. In an interleaved schedule the last micro-batch's
// reduce-scatters may be seen finished only during a later chunk's backward (not the last
// micro-batch's; support/late_completing_communicator.h makes them so): their shards must
// still reach the host.
TEST_F(PipelineTest, OnADeviceZeroOffloadGivesTheDeviceLosses) {
  std::vector<Layout> cases;
  for (const Layout& l : layouts())
    if (l.zero_stage > 0) cases.push_back(l);
  if (world->size() == 4) cases.push_back({2, 1, 2, "interleaved", 2, 1});
  if (cases.empty()) GTEST_SKIP() << "no pipeline layouts with ZeRO on " << world->size() << " rank(s)";
  const std::shared_ptr<comm::Communicator> late(testing::late_completing(world));
  int k = 0;
  for (const Layout& l : cases) {
    TrainConfig cfg = config("device_offload" + std::to_string(k++));
    apply(l, cfg);
    cfg.precision.dtype = "bf16";
    cfg.parallel.bucket_mb = 0.01;  // a chunk's buckets complete before the other chunk's
    cfg.train.steps = 4;
    cfg.train.eval_interval = 2;
    const Run on_device = train(cfg, world, -1, testing::emulated_device());
    cfg.parallel.offload_optimizer = true;
    cfg.train.out_dir += "_offloaded";
    const Run offloaded = train(cfg, late, -1, testing::emulated_device());
    ASSERT_EQ(on_device.losses.size(), 4u) << l.str();
    EXPECT_EQ(offloaded.losses, on_device.losses) << l.str();
    EXPECT_EQ(offloaded.val, on_device.val) << l.str();
  }
}

// NCCL matches messages by the order each side posts them, and its sends may wait for their
// receives (support/order_matched_communicator.h stands in for it): every layout posts each
// pair's messages in the same order on both sides and never waits on a send whose receive the
// peer has queued behind its own, so the losses are the tagged MPI run's bit for bit.
TEST_F(PipelineTest, MessagesMatchedByOrderGiveTheTaggedLosses) {
  if (layouts().empty()) GTEST_SKIP() << "no pipeline layouts on " << world->size() << " rank(s)";
  const std::shared_ptr<comm::Communicator> ordered(testing::order_matched(world));
  std::vector<Layout> all = layouts();
  if (world->size() == 4) all.push_back({1, 1, 4, "interleaved", 2});  // 8 chunks around 4 ranks
  int k = 0;
  for (const Layout& l : all) {
    TrainConfig cfg = config("ordered" + std::to_string(k++));
    apply(l, cfg);
    if (l.pp * l.virtual_stages > cfg.model.n_layer) cfg.model.n_layer = l.pp * l.virtual_stages;
    cfg.train.steps = 4;
    cfg.train.eval_interval = 2;
    const Run tagged = train(cfg, world);
    cfg.train.out_dir += "_ordered";
    const Run ordered_run = train(cfg, ordered);
    EXPECT_EQ(ordered_run.losses, tagged.losses) << l.str();
    EXPECT_EQ(ordered_run.val, tagged.val) << l.str();
  }
}

// Saved at step 5 under the first layout; resumed under the last layout and in one process:
// the 10 losses are those of the uninterrupted single-process run.
TEST_F(PipelineTest, CheckpointsResumeUnderAnotherLayout) {
  if (layouts().empty()) GTEST_SKIP() << "no pipeline layouts on " << world->size() << " rank(s)";
  const Run straight = train(config("straight_rank" + std::to_string(world->rank())), nullptr);
  const Layout save = layouts().front();
  const Layout resume = world->size() == 8 ? Layout{4, 1, 2, "1f1b", 1, 1} : layouts().back();
  TrainConfig first = config("saved");
  apply(save, first);
  first.train.checkpoint_interval = 5;
  const Run a = train(first, world, 5);
  for (const char* where : {"layout", "single"}) {
    const std::string copy = std::string("resumed_") + where;
    if (world->rank() == 0) fs::copy(dir / "saved", dir / copy, fs::copy_options::recursive);
    world->barrier();
    TrainConfig second = config(copy);
    const bool here = std::string(where) == "layout" || world->rank() == 0;
    Run b;
    if (std::string(where) == "layout") {
      apply(resume, second);
      b = train(second, world);
    } else if (world->rank() == 0) {
      b = train(second, nullptr);
    }
    if (here) {
      std::vector<double> joined = a.losses;
      joined.insert(joined.end(), b.losses.begin(), b.losses.end());
      expect_close(joined, straight.losses, save.str() + " then " + (std::string(where) == "layout" ? resume.str() : "one process"));
    }
    world->barrier();
  }
}

// bf16 under the first layout (ZeRO-1 where it has data parallelism): each stage's checkpoint
// holds its fp32 masters; resumed under the same layout the losses are the uninterrupted
// run's bit for bit, and one process continues them within bf16's tolerance.
TEST_F(PipelineTest, MixedPrecisionCheckpointsHoldTheMasters) {
  if (layouts().empty()) GTEST_SKIP() << "no pipeline layouts on " << world->size() << " rank(s)";
  const Layout layout = layouts().front();
  TrainConfig cfg = config("bf16_straight");
  cfg.precision.dtype = "bf16";
  apply(layout, cfg);
  const Run straight = train(cfg, world);
  cfg.train.out_dir = (dir / "bf16_saved").string();
  cfg.train.checkpoint_interval = 5;
  const Run a = train(cfg, world, 5);
  if (world->rank() == 0) fs::copy(dir / "bf16_saved", dir / "bf16_single", fs::copy_options::recursive);
  world->barrier();
  const Run b = train(cfg, world);
  std::vector<double> joined = a.losses;
  joined.insert(joined.end(), b.losses.begin(), b.losses.end());
  EXPECT_EQ(joined, straight.losses) << "bf16, " << layout.str() << ": resumed";
  if (world->rank() == 0) {
    TrainConfig single = cfg;
    single.parallel = {};
    single.train.out_dir = (dir / "bf16_single").string();
    const Run c = train(single, nullptr);
    ASSERT_EQ(c.losses.size(), 5u);
    for (size_t i = 0; i < c.losses.size(); ++i)
      EXPECT_NEAR(c.losses[i], straight.losses[5 + i], 1e-3 * std::abs(straight.losses[5 + i]))
          << "bf16, " << layout.str() << ": one process from the checkpoint, step " << 6 + i;
  }
  world->barrier();
}

TEST_F(PipelineTest, LayoutsThatDoNotFitAreClearErrors) {
  if (world->size() < 2) GTEST_SKIP();
  TrainConfig cfg = config("bad");
  cfg.parallel.pp = 2;
  cfg.model.n_layer = 1;
  try {
    auto t = Trainer::create(cfg, world);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.n_layer (1) must be at least parallel.pp x parallel.virtual_stages"),
              std::string::npos)
        << e.what();
  }
  cfg = config("bad2");
  cfg.parallel.pp = 2;
  cfg.parallel.zero_stage = 2;
  try {
    auto t = Trainer::create(cfg, world);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pipeline parallelism composes with ZeRO stages 0-1"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace trident::train
