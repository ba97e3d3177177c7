// Tensor parallelism under mpirun (1, 2 and 4 ranks, label mpi): every dp x tp layout the
// rank count allows, with ZeRO stages 0-2 and gradient accumulation, trains with the per-step
// losses of the single-process run on the same seed, init and global batch; each layer costs
// exactly 4 tensor-parallel all-reduces per micro-batch; checkpoints saved under one layout
// resume under another and in one process. On a device (the emulated one: host kernels,
// collectives staged through host memory) the layouts give the host's losses bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "comm/mpi_communicator.h"
#include "core/factory.h"
#include "models/gpt2/model.h"
#include "parallel/tensor_parallel.h"
#include "support/emulated_device.h"
#include "support/mpi_training_test.h"
#include "support/tiny_run.h"
#include "train/trainer.h"

namespace trident::train {
namespace {

namespace fs = std::filesystem;

class TensorParallelTest : public testing::MpiTrainingTest {
 protected:
  // The tiny run with 4 heads, so that tp 2 and 4 both split them; 10 steps.
  TrainConfig config(const std::string& out) const {
    TrainConfig cfg = testing::tiny_run_config(dir);
    cfg.model.n_head = 4;
    cfg.data.sampler = "sequential";
    cfg.train.steps = 10;
    cfg.train.eval_interval = 5;
    cfg.train.checkpoint_interval = 1000;
    cfg.train.out_dir = (dir / out).string();
    return cfg;
  }

  std::vector<int64_t> tp_degrees() const {
    std::vector<int64_t> out;
    for (int64_t tp : {2, 4})
      if (world->size() % tp == 0) out.push_back(tp);
    return out;
  }
};

TEST_F(TensorParallelTest, LossesEqualTheSingleProcessRun) {
  if (tp_degrees().empty()) GTEST_SKIP() << "one rank has no tensor parallelism";
  for (int64_t tp : tp_degrees())
    for (int64_t stage : {0, 1, 2, 3})
      for (int64_t accum : {1, 2})
        for (bool sp : {false, true}) {
        if (stage == 2 && accum == 2 && tp == 4) continue;  // covered by the others; keeps the test short
        TrainConfig cfg = config("tp" + std::to_string(tp) + "_z" + std::to_string(stage) + "_a" + std::to_string(accum) +
                                 (sp ? "_sp" : ""));
        cfg.parallel.tp = tp;
        cfg.parallel.sequence_parallel = sp;
        cfg.parallel.zero_stage = stage;
        cfg.data.grad_accum_steps = accum;
        TrainConfig single = cfg;
        single.parallel = {};
        single.train.out_dir += "_single_rank" + std::to_string(world->rank());
        const Run ref = train(single, nullptr);
        const Run got = train(cfg, world);
        const std::string what = "dp " + std::to_string(world->size() / tp) + " x tp " + std::to_string(tp) +
                                 (sp ? " (sequence parallel)" : "") + ", ZeRO " + std::to_string(stage) + ", accum " +
                                 std::to_string(accum);
        expect_close(got.losses, ref.losses, what + " (train loss)");
        expect_close(got.val, ref.val, what + " (val loss)");
      }
}

// bf16 and fp16 with tensor (and sequence) parallelism, alone and under ZeRO: each rank keeps
// fp32 masters of its own slices. The all-reduces of the row-parallel layers add bf16 partial
// sums where one process rounds the whole matmul once, so the runs agree to those roundings:
// within 1e-3 relative.
TEST_F(TensorParallelTest, MixedPrecisionFollowsTheSingleProcessRun) {
  if (tp_degrees().empty()) GTEST_SKIP() << "one rank has no tensor parallelism";
  for (const std::string dtype : {"bf16", "fp16"}) {
    TrainConfig single = config("mixed_single_" + dtype + "_rank" + std::to_string(world->rank()));
    single.precision.dtype = dtype;
    single.data.grad_accum_steps = 2;
    const Run ref = train(single, nullptr);
    const int64_t tp = tp_degrees().front();
    for (int64_t stage : {0, 2})
      for (bool sp : {false, true}) {
        if (dtype == "fp16" && (stage != 2 || !sp)) continue;  // one fp16 layout: the loss scale's path
        TrainConfig cfg = single;
        cfg.train.out_dir = (dir / ("mixed_" + dtype + "_z" + std::to_string(stage) + (sp ? "_sp" : ""))).string();
        cfg.parallel.tp = tp;
        cfg.parallel.sequence_parallel = sp;
        cfg.parallel.zero_stage = stage;
        const Run got = train(cfg, world);
        const std::string what = dtype + ", dp " + std::to_string(world->size() / tp) + " x tp " + std::to_string(tp) +
                                 (sp ? " (sequence parallel)" : "") + ", ZeRO " + std::to_string(stage);
        ASSERT_EQ(got.losses.size(), ref.losses.size()) << what;
        for (size_t i = 0; i < ref.losses.size(); ++i)
          EXPECT_NEAR(got.losses[i], ref.losses[i], 1e-3 * std::abs(ref.losses[i])) << what << ", step " << i + 1;
        ASSERT_EQ(got.val.size(), ref.val.size()) << what;
        for (size_t i = 0; i < ref.val.size(); ++i)
          EXPECT_NEAR(got.val[i], ref.val[i], 1e-3 * std::abs(ref.val[i])) << what << ", evaluation " << i + 1;
        double worst = 0;
        for (size_t i = 0; i < ref.losses.size(); ++i)
          worst = std::max(worst, std::abs(got.losses[i] - ref.losses[i]) / std::abs(ref.losses[i]));
        if (world->rank() == 0) std::printf("%s: largest relative loss difference %.2e\n", what.c_str(), worst);
      }
  }
}

// bf16 under tp with sequence parallelism and ZeRO-3 on a device: the losses are the host run's
// bit for bit.
TEST_F(TensorParallelTest, OnADeviceBf16GivesTheHostLossesBitForBit) {
  if (tp_degrees().empty()) GTEST_SKIP() << "one rank has no tensor parallelism";
  TrainConfig cfg = config("device_bf16");
  cfg.precision.dtype = "bf16";
  cfg.model.vocab_size = 67;  // an uneven split
  cfg.parallel.tp = tp_degrees().front();
  cfg.parallel.sequence_parallel = true;
  cfg.parallel.zero_stage = 3;
  cfg.data.grad_accum_steps = 2;
  cfg.train.steps = 4;
  cfg.train.eval_interval = 2;
  expect_device_run_equals_host(cfg, "bf16, tp " + std::to_string(cfg.parallel.tp) + ", sequence parallel, ZeRO 3");
}

// fp16 with overflowing steps under tensor parallelism, alone and with ZeRO-1: every rank
// skips the same steps as one process.
TEST_F(TensorParallelTest, Fp16SkipsOverflowingStepsAsOneProcessDoes) {
  if (tp_degrees().empty()) GTEST_SKIP() << "one rank has no tensor parallelism";
  TrainConfig single = config("overflow_single_rank" + std::to_string(world->rank()));
  force_fp16_overflows(single);
  const std::vector<StepMetrics> ref = train_steps(single, nullptr);
  for (int64_t stage : {0, 1}) {
    TrainConfig cfg = single;
    cfg.train.out_dir = (dir / ("overflow_z" + std::to_string(stage))).string();
    cfg.parallel.tp = tp_degrees().front();
    cfg.parallel.zero_stage = stage;
    expect_same_skips(train_steps(cfg, world), ref, "fp16, tp " + std::to_string(cfg.parallel.tp) + ", ZeRO " +
                                                        std::to_string(stage));
  }
}

// The same layouts with the model on a device: tensor-parallel gathers, the vocabulary-parallel
// embedding and cross-entropy (ops/vocab_parallel.h) and the gradient norm work where the
// parameters are, and the losses are the host run's bit for bit. On GPUs this runs over NCCL.
TEST_F(TensorParallelTest, OnADeviceLayoutsGiveTheHostLossesBitForBit) {
  if (tp_degrees().empty()) GTEST_SKIP() << "one rank has no tensor parallelism";
  for (int64_t tp : tp_degrees())
    for (int64_t stage : {0, 2, 3})
      for (bool sp : {false, true}) {
        TrainConfig cfg = config("device_tp" + std::to_string(tp) + "_z" + std::to_string(stage) + (sp ? "_sp" : ""));
        cfg.model.vocab_size = 67;  // an uneven split
        cfg.parallel.tp = tp;
        cfg.parallel.sequence_parallel = sp;
        cfg.parallel.zero_stage = stage;
        cfg.data.grad_accum_steps = 2;
        cfg.train.steps = 4;
        cfg.train.eval_interval = 2;
        expect_device_run_equals_host(cfg, "tp " + std::to_string(tp) + (sp ? " (sequence parallel)" : "") +
                                               ", ZeRO " + std::to_string(stage));
      }
}

// A vocabulary the ranks cannot split evenly (67 = 34 + 33, or 17 + 17 + 17 + 16): the
// losses are still the single-process run's, and the checkpoint's boxes reassemble wte.
TEST_F(TensorParallelTest, AnUnevenVocabularySplitsByOneRow) {
  if (tp_degrees().empty()) GTEST_SKIP() << "one rank has no tensor parallelism";
  for (int64_t tp : tp_degrees()) {
    TrainConfig cfg = config("uneven" + std::to_string(tp));
    cfg.model.vocab_size = 67;
    cfg.parallel.tp = tp;
    TrainConfig single = cfg;
    single.parallel = {};
    single.train.out_dir += "_single_rank" + std::to_string(world->rank());
    const Run ref = train(single, nullptr);
    const Run got = train(cfg, world);
    expect_close(got.losses, ref.losses, "vocabulary 67 over tp " + std::to_string(tp));
    if (world->rank() == 0) {  // the final checkpoint, loaded in one process, continues identically
      TrainConfig again = single;
      again.train.out_dir = cfg.train.out_dir;
      again.train.steps = 12;
      const Run more = train(again, nullptr);
      EXPECT_EQ(more.losses.size(), 2u);
    }
    world->barrier();
  }
}

// The plan is data the applier checks: an entry that names no layer, or a layer whose type has
// no such style, is an error naming the entry (and the layer, its type and the styles it has),
// not a silently replicated layer.
TEST_F(TensorParallelTest, APlanEntryThatFitsNoLayerIsAnErrorNamingIt) {
  if (world->size() < 2) GTEST_SKIP() << "one rank has no tensor parallelism";
  struct Planned : models::gpt2::GPT2 {
    Planned(const models::gpt2::GPT2Config& c, nn::ParallelPlan p) : GPT2(c), plan(std::move(p)) {}
    nn::ParallelPlan parallel_plan(int64_t) const override { return plan; }
    nn::ParallelPlan plan;
  };
  const models::gpt2::GPT2Config cfg = models::gpt2::GPT2Config::from(config("plan").model);
  auto error = [&](nn::ParallelPlan plan) -> std::string {
    Planned model(cfg, std::move(plan));
    try {
      parallel::TensorParallelPlan::apply(model, *world);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  };
  std::string e = error({{"h.*.attn.c_atn", nn::tp_style::kColumnwise, 3}});
  EXPECT_NE(e.find("the plan's entry 'h.*.attn.c_atn' (columnwise) matches no layer of the model"), std::string::npos)
      << e;
  e = error({{"h.*.ln_1", nn::tp_style::kRowwise}});
  EXPECT_NE(e.find("the plan's entry 'h.*.ln_1' (rowwise) names layer 'h.0.ln_1' of type nn::LayerNorm, which has no "
                   "style 'rowwise' (its styles: sequence_parallel;"),
            std::string::npos)
      << e;
  e = error({{"h.*.attn", nn::tp_style::kColumnwise}});  // a module no style is registered for
  EXPECT_NE(e.find("names layer 'h.0.attn' of type models::gpt2::CausalSelfAttention, which has no style 'columnwise' "
                   "(no tensor-parallel style is registered for that type"),
            std::string::npos)
      << e;
}

// All-reduce calls on the tensor-parallel communicator over one step, for 2 and 3 layers:
// one more layer adds exactly 4 per micro-batch (2 forward after the row-parallel layers, 2
// backward before the column-parallel ones).
TEST_F(TensorParallelTest, FourAllReducesPerLayerPerMicroBatch) {
  if (tp_degrees().empty()) GTEST_SKIP() << "one rank has no tensor parallelism";
  for (int64_t accum : {1, 2}) {
    std::vector<int64_t> calls;
    for (int64_t layers : {2, 3}) {
      TrainConfig cfg = config("count" + std::to_string(layers) + "_" + std::to_string(accum));
      cfg.model.n_layer = layers;
      cfg.parallel.tp = 2;
      cfg.data.grad_accum_steps = accum;
      cfg.train.eval_interval = 1000;
      auto t = Trainer::create(cfg, world);
      ASSERT_TRUE(t.is_ok()) << t.status().to_string();
      t.value()->show_progress = false;
      // This rank holds its shards: half of each of q, k, v; half the MLP; half the vocabulary.
      const int64_t C = cfg.model.n_embd;
      EXPECT_EQ(t.value()->model().parameter("h.0.attn.c_attn.weight").shape(), Shape({C, 3 * C / 2}));
      EXPECT_EQ(t.value()->model().parameter("h.0.mlp.c_proj.weight").shape(), Shape({2 * C, C}));
      EXPECT_EQ(t.value()->model().parameter("wte.weight").shape(), Shape({cfg.model.vocab_size / 2, C}));
      comm::Communicator& tp = t.value()->mesh()->tp();
      tp.reset_stats();
      ASSERT_TRUE(t.value()->run(1).is_ok());
      calls.push_back(tp.stats().of(comm::CommOp::kAllReduce).calls);
    }
    if (world->rank() == 0)
      std::printf("tp all-reduces per step, accumulation %lld: %lld with 2 layers, %lld with 3\n",
                  static_cast<long long>(accum), static_cast<long long>(calls[0]), static_cast<long long>(calls[1]));
    EXPECT_EQ(calls[1] - calls[0], 4 * accum) << "accumulation " << accum;
  }
}

// Sequence parallelism: the same 4 per layer and micro-batch become all-gathers and
// reduce-scatters along the sequence (2 of each forward, 2 of each backward), and no
// activation is all-reduced any more.
TEST_F(TensorParallelTest, SequenceParallelTurnsThemIntoGatherScatterPairs) {
  if (tp_degrees().empty()) GTEST_SKIP() << "one rank has no tensor parallelism";
  for (int64_t accum : {1, 2}) {
    std::vector<comm::CommStats> stats;
    for (int64_t layers : {2, 3}) {
      TrainConfig cfg = config("sp" + std::to_string(layers) + "_" + std::to_string(accum));
      cfg.model.n_layer = layers;
      cfg.parallel.tp = 2;
      cfg.parallel.sequence_parallel = true;
      cfg.data.grad_accum_steps = accum;
      stats.push_back(tp_stats_of_one_step(cfg, world));
    }
    auto added = [&](comm::CommOp op) { return stats[1].of(op).calls - stats[0].of(op).calls; };
    const int64_t elements = stats[1].of(comm::CommOp::kAllReduce).elements - stats[0].of(comm::CommOp::kAllReduce).elements;
    if (world->rank() == 0)
      std::printf("sequence parallel, accumulation %lld, one more layer: %lld all-gathers, %lld reduce-scatters, "
                  "%lld all-reduces of %lld parameter-gradient elements\n",
                  static_cast<long long>(accum), static_cast<long long>(added(comm::CommOp::kAllGather)),
                  static_cast<long long>(added(comm::CommOp::kReduceScatter)),
                  static_cast<long long>(added(comm::CommOp::kAllReduce)), static_cast<long long>(elements));
    EXPECT_EQ(added(comm::CommOp::kAllGather), 4 * accum);
    EXPECT_EQ(added(comm::CommOp::kReduceScatter), 4 * accum);
    // What remains all-reduced per layer is parameter gradients: the two layer norms and the
    // two row-parallel biases (6 vectors of n_embd), not activations.
    EXPECT_EQ(elements, 6 * 32 * accum);
  }
}

// Saved under dp x tp = (N/2) x 2 at step 5; resumed under dp N x tp 1 with ZeRO-1, and in
// one process: the 10 losses are those of the run that was never interrupted.
TEST_F(TensorParallelTest, CheckpointsResumeUnderAnotherLayout) {
  if (tp_degrees().empty()) GTEST_SKIP() << "one rank has no tensor parallelism";
  TrainConfig straight_cfg = config("straight_rank" + std::to_string(world->rank()));
  const Run straight = train(straight_cfg, nullptr);
  TrainConfig first = config("saved");
  first.parallel.tp = 2;
  first.parallel.zero_stage = 1;
  first.train.checkpoint_interval = 5;
  const Run a = train(first, world, 5);
  for (const char* layout : {"dp", "single"}) {
    const std::string copy = std::string("resumed_") + layout;
    if (world->rank() == 0) fs::copy(dir / "saved", dir / copy, fs::copy_options::recursive);
    world->barrier();
    TrainConfig second = config(copy);
    Run b;
    if (std::string(layout) == "dp") {
      second.parallel.zero_stage = 1;
      b = train(second, world);
    } else if (world->rank() == 0) {
      b = train(second, nullptr);
    }
    if (std::string(layout) == "dp" || world->rank() == 0) {
      std::vector<double> joined = a.losses;
      joined.insert(joined.end(), b.losses.begin(), b.losses.end());
      expect_close(joined, straight.losses, std::string("tp 2 then ") + layout);
    }
    world->barrier();
  }
}

// bf16 under tp 2, alone and with ZeRO-2 and ZeRO-3: checkpoints hold each slice's fp32 masters
// (ZeRO's gathered from its shards); resumed under the same layout the losses are the uninterrupted
// run's bit for bit, and one process continues them within bf16's tolerance.
TEST_F(TensorParallelTest, MixedPrecisionCheckpointsHoldTheMasters) {
  if (tp_degrees().empty()) GTEST_SKIP() << "one rank has no tensor parallelism";
  for (int64_t stage : {0, 2, 3}) {
    const std::string name = "bf16_z" + std::to_string(stage);
    TrainConfig cfg = config(name + "_straight");
    cfg.precision.dtype = "bf16";
    cfg.parallel.tp = 2;
    cfg.parallel.zero_stage = stage;
    const Run straight = train(cfg, world);
    cfg.train.out_dir = (dir / (name + "_saved")).string();
    cfg.train.checkpoint_interval = 5;
    const Run a = train(cfg, world, 5);
    if (world->rank() == 0) fs::copy(dir / (name + "_saved"), dir / (name + "_single"), fs::copy_options::recursive);
    world->barrier();
    const Run b = train(cfg, world);
    std::vector<double> joined = a.losses;
    joined.insert(joined.end(), b.losses.begin(), b.losses.end());
    EXPECT_EQ(joined, straight.losses) << "bf16, tp 2, ZeRO " << stage << ": resumed";
    if (world->rank() == 0) {
      TrainConfig single = cfg;
      single.parallel = {};
      single.train.out_dir = (dir / (name + "_single")).string();
      const Run c = train(single, nullptr);
      ASSERT_EQ(c.losses.size(), 5u);
      for (size_t i = 0; i < c.losses.size(); ++i)
        EXPECT_NEAR(c.losses[i], straight.losses[5 + i], 1e-3 * std::abs(straight.losses[5 + i]))
            << "bf16, tp 2, ZeRO " << stage << ": one process from the checkpoint, step " << 6 + i;
    }
    world->barrier();
  }
}

TEST_F(TensorParallelTest, LayoutsThatDoNotFitAreClearErrors) {
  if (world->size() < 2) GTEST_SKIP();
  TrainConfig cfg = config("bad");
  cfg.parallel.tp = world->size() + 1;
  try {
    auto t = Trainer::create(cfg, world);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.tp (" + std::to_string(cfg.parallel.tp) + ") x parallel.pp (1) must divide"),
              std::string::npos)
        << e.what();
  }
  cfg.parallel.tp = 2;
  cfg.model.n_head = 3;
  cfg.model.n_embd = 48;
  try {
    auto t = Trainer::create(cfg, world);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.n_head (3) must be divisible by parallel.tp (2)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace trident::train
