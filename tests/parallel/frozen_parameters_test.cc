// Frozen parameters (train.freeze, and LoRA's frozen base; parallel/placement.h) under every strategy, on 2 and 4
// ranks: data parallel, ZeRO 1-3, tensor, pipeline and their compositions. A frozen
// parameter gets no gradient and no optimizer state on any rank (the allocator's optimizer-
// state bytes are the trainable parameters' alone), enters no collective (the elements the
// data-parallel group hands to its collectives are the trainable parameters' alone), is bit
// for bit what it was after training, is saved with the weights and not with the optimizer
// state, and resumes; the trainable ones give the single-process run's losses within 1e-5.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "checkpoint/checkpoint_dir.h"
#include "core/allocator.h"
#include "core/copy.h"
#include "support/mpi_training_test.h"
#include "support/tiny_run.h"
#include "train/trainer.h"

namespace trident::train {
namespace {

// Replicated and split over tensor parallelism, on both pipeline stages, in the root part and
// in blocks (ZeRO-3).
constexpr const char* kFrozen = "wpe.weight,h.0.attn.c_attn.*,h.1.mlp.c_fc.weight,ln_f.bias";

struct Layout {
  const char* name;
  int world;  // the ranks it needs
  void (*apply)(TrainConfig&);
};

const std::vector<Layout>& layouts() {
  static const std::vector<Layout> l = {
      {"dp2", 2, [](TrainConfig&) {}},
      {"dp2_zero1", 2, [](TrainConfig& c) { c.parallel.zero_stage = 1; }},
      {"dp2_zero2", 2, [](TrainConfig& c) { c.parallel.zero_stage = 2; }},
      {"dp2_zero3", 2, [](TrainConfig& c) { c.parallel.zero_stage = 3; }},
      {"tp2", 2, [](TrainConfig& c) { c.parallel.tp = 2; }},
      {"pp2", 2, [](TrainConfig& c) { c.parallel.pp = 2; }},
      {"dp2_zero2_bf16", 2, [](TrainConfig& c) {
         c.parallel.zero_stage = 2;
         c.precision.dtype = "bf16";
       }},
      {"dp2_tp2_zero1", 4, [](TrainConfig& c) {
         c.parallel.tp = 2;
         c.parallel.zero_stage = 1;
       }},
      {"tp2_pp2", 4, [](TrainConfig& c) {
         c.parallel.tp = 2;
         c.parallel.pp = 2;
       }},
      {"dp2_pp2_zero1", 4, [](TrainConfig& c) {
         c.parallel.pp = 2;
         c.parallel.zero_stage = 1;
       }},
  };
  return l;
}

class FrozenParametersTest : public testing::MpiTrainingTest {
 protected:
  TrainConfig config(const std::string& out, const std::string& freeze) const {
    TrainConfig cfg = testing::tiny_run_config(dir);
    cfg.data.sampler = "sequential";
    cfg.train.out_dir = (dir / out).string();
    cfg.train.freeze = freeze;
    cfg.train.steps = 3;
    cfg.train.eval_interval = 1000;
    cfg.train.eval_batches = 1;
    return cfg;
  }
};

int64_t padded(int64_t n, int64_t N) { return (n + N - 1) / N * N; }

// What freezes part of the model: train.freeze's patterns, or LoRA (its whole base).
struct Freezing {
  const char* name;
  void (*apply)(TrainConfig&);
  bool tensor_parallel;  // runs under tensor parallelism (LoRA: the factors split with their layer)
};

class FrozenLayoutsTest : public FrozenParametersTest, public ::testing::WithParamInterface<Freezing> {};

TEST_P(FrozenLayoutsTest, NoGradientNoStateNoCollectiveAndTheSingleProcessLosses) {
  const Freezing& freezing = GetParam();
  int tested = 0;
  for (const Layout& layout : layouts()) {
    if (layout.world != world->size()) continue;
    if (!freezing.tensor_parallel && std::string(layout.name).find("tp2") != std::string::npos) continue;
    ++tested;
    SCOPED_TRACE(layout.name);
    const std::string prefix = std::string(freezing.name) + "_";
    TrainConfig single = config(prefix + "single_" + layout.name + "_rank" + std::to_string(world->rank()), "");
    freezing.apply(single);
    if (std::string(layout.name).ends_with("bf16")) single.precision.dtype = "bf16";
    // Every rank alone: the control. Three steps: LoRA's A first moves at step 2 (B starts at
    // zero), so only step 3's loss sees A's gradient.
    const Run ref = train(single, nullptr, 3);

    TrainConfig cfg = config(prefix + layout.name, "");
    freezing.apply(cfg);
    layout.apply(cfg);
    const bool mixed = cfg.precision.dtype != "fp32";
    host_allocator().reset_peak_stats();
    const MemoryStats before = host_allocator().stats();
    auto t = Trainer::create(cfg, world);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    Trainer& trainer = *t.value();
    trainer.show_progress = false;
    const parallel::PlacementTable& table = trainer.placements();
    const int stage = trainer.mesh()->pp_rank();
    // This rank's frozen and trainable parameters as the trainer placed them.
    std::map<std::string, Tensor> frozen_before;
    int64_t trainable = 0, frozen = 0;
    std::vector<std::vector<std::string>> parts;  // ZeRO-3's gather units, trainable names
    for (const parallel::ParamPlacement* row : table.on_stage(stage)) {
      const Tensor p = trainer.model().parameter(row->name);
      if (row->trainable) {
        trainable += p.numel();
        continue;
      }
      frozen += p.numel();
      frozen_before.emplace(row->name, core::clone(p));
      EXPECT_EQ(p.dtype(), mixed ? DType::kBF16 : DType::kF32) << row->name << ": its storage dtype";
      EXPECT_FALSE(p.requires_grad()) << row->name;
    }
    ASSERT_GT(frozen, 0) << "the layout must hold frozen parameters on every rank";
    for (const auto& part : trainer.model().parts()) {
      parts.emplace_back();
      for (const auto& [name, p] : part)
        if (table.at(name).trainable) parts.back().push_back(name);
    }
    comm::Communicator& dp = trainer.mesh()->dp();
    dp.reset_stats();
    std::vector<double> losses;
    trainer.on_step = [&](const StepMetrics& m) { losses.push_back(m.loss); };
    ASSERT_TRUE(trainer.run(2).is_ok());
    const comm::CommStats stats = dp.stats();
    const MemoryStats after = host_allocator().stats();

    // The single-process run's losses.
    ASSERT_EQ(losses.size(), 2u);
    expect_close(losses, {ref.losses[0], ref.losses[1]}, layout.name);
    // Frozen: no gradient, the same bits.
    for (const auto& [name, was] : frozen_before) {
      const Tensor now = trainer.model().parameter(name);
      EXPECT_FALSE(now.grad().has_value()) << name;
      EXPECT_EQ(to_vector<float>(now), to_vector<float>(was)) << name << " changed";
    }
    // Optimizer state (m, v; fp32 masters under mixed precision) for the trainable parameters
    // only: whole, or ZeRO's 1/N of the padded buckets.
    const int64_t N = dp.size(), z = cfg.parallel.zero_stage;
    const double per = mixed ? 12.0 : 8.0;
    const double state = static_cast<double>(after.category(MemoryCategory::kOptimizerState).current -
                                              before.category(MemoryCategory::kOptimizerState).current);
    int64_t flat = 0;  // ZeRO's buckets: one for the tiny model (stages 1-2), a part each (stage 3)
    if (z == 3) {
      for (const auto& part : parts) {
        int64_t n = 0;
        for (const std::string& name : part) n += trainer.model().parameter(name).numel();
        flat += padded(n, N);
      }
    } else {
      flat = padded(trainable, N);
    }
    const double want = z == 0 ? per * static_cast<double>(trainable) : per * static_cast<double>(flat / N);
    EXPECT_EQ(state, want) << "optimizer-state bytes: " << trainable << " trainable, " << frozen << " frozen elements";
    // The data-parallel group's collectives per step: the trainable elements alone.
    const int64_t ar = stats.of(comm::CommOp::kAllReduce).elements, rs = stats.of(comm::CommOp::kReduceScatter).elements,
                  ag = stats.of(comm::CommOp::kAllGather).elements, bc = stats.of(comm::CommOp::kBroadcast).elements;
    EXPECT_EQ(bc, 0);
    if (z == 0) {
      EXPECT_GE(ar, 2 * trainable);
      EXPECT_LE(ar, 2 * trainable + 16) << "beyond the trainable gradients, only scalars";
      EXPECT_EQ(rs + ag, 0);
    } else {
      EXPECT_EQ(rs, 2 * flat);
      EXPECT_EQ(ag, (z == 3 ? 4 : 2) * flat);
      EXPECT_LE(ar, 16) << "only scalars are all-reduced";
    }
    // The checkpoint holds the frozen weights but no state for them; it resumes.
    auto saved = trainer.save_checkpoint();
    ASSERT_TRUE(saved.is_ok() && saved.value());
    auto r = checkpoint::CheckpointReader::open(checkpoint::default_env(), cfg.train.out_dir + "/step_000002");
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    for (const parallel::ParamPlacement& row : table.params()) {
      EXPECT_TRUE(r.value().has_tensor(row.name)) << row.name;
      EXPECT_EQ(r.value().has_tensor(row.name + ".exp_avg"), row.trainable) << row.name;
    }
    ASSERT_TRUE(trainer.run(3).is_ok());
    const std::vector<double> straight = losses;  // steps 1-3
    expect_close(straight, ref.losses, layout.name);
    TrainConfig resumed = cfg;
    resumed.train.out_dir += "_resumed";
    if (world->rank() == 0) std::filesystem::create_directories(resumed.train.out_dir);
    world->barrier();
    if (world->rank() == 0)
      std::filesystem::copy(cfg.train.out_dir + "/step_000002", resumed.train.out_dir + "/step_000002",
                            std::filesystem::copy_options::recursive);
    world->barrier();
    const Run again = train(resumed, world, 3);
    ASSERT_EQ(again.losses.size(), 1u);
    EXPECT_EQ(again.losses[0], straight[2]) << "the resumed step";
  }
  if (tested == 0) GTEST_SKIP() << "no layout of " << world->size() << " ranks";
}

INSTANTIATE_TEST_SUITE_P(
    Freezings, FrozenLayoutsTest,
    ::testing::Values(Freezing{"freeze", [](TrainConfig& c) { c.train.freeze = kFrozen; }, true},
                      // LoRA (issue #48): the whole base frozen, adapters on attention and MLP
                      // layers (c_proj names two per block: row-parallel, the others column-
                      // parallel, c_attn's B in 3 fused blocks), the only trainable parameters.
                      Freezing{"lora",
                               [](TrainConfig& c) {
                                 c.lora.r = 4;
                                 c.lora.alpha = 8;
                                 c.lora.target_modules = "c_attn,c_proj,c_fc";
                               },
                               true}),
    [](const ::testing::TestParamInfo<Freezing>& info) { return std::string(info.param.name); });

// A whole block frozen: ZeRO-3's part for it holds nothing to gather or reduce.
TEST_F(FrozenParametersTest, AWholeFrozenBlockUnderZero3) {
  if (world->size() != 2) GTEST_SKIP() << "runs on 2 ranks";
  TrainConfig cfg = config("zero3_block", "h.1.*");
  cfg.parallel.zero_stage = 3;
  const Run ref = train(config("zero3_block_single_rank" + std::to_string(world->rank()), "h.1.*"), nullptr, 2);
  const Run got = train(cfg, world, 2);
  ASSERT_EQ(got.losses.size(), 2u);
  expect_close(got.losses, ref.losses, "zero3, h.1 frozen");
}

TEST_F(FrozenParametersTest, APatternThatMatchesNothingIsAClearError) {
  TrainConfig cfg = config("typo", "h.0.attn.c_atn.*");
  try {
    (void)Trainer::create(cfg, world);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("train.freeze: 'h.0.attn.c_atn.*' matches no parameter"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace trident::train
