// Training on masked tokens (instruction data's loss masks, issue #48 item 5; Note [Steps over
// masked tokens] in train/trainer.cc). The tiny run's token files get masks that train on runs
// of 23 tokens out of 69 and on nothing in the first 200, so the first micro-batch of the first
// step has no trained target at all. On one rank: the step's loss is the mean cross-entropy over
// the step's trained targets, computed here from the model's logits (the untrained targets and
// the empty micro-batch add nothing; the loss is finite); evaluation likewise. On 2 and 4 ranks:
// data parallel (with ZeRO), tensor and pipeline parallel runs give the single-process losses
// within 1e-5.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/grad_mode.h"
#include "data/loss_mask.h"
#include "data/sampler.h"
#include "models/registry.h"
#include "support/mpi_training_test.h"

namespace trident::train {
namespace {

std::vector<uint8_t> mask_of(int64_t n) {
  std::vector<uint8_t> m(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) m[static_cast<size_t>(i)] = i >= 200 && (i / 23) % 3 == 1 ? 1 : 0;
  return m;
}

class MaskedLossTest : public testing::MpiTrainingTest {
 protected:
  void SetUp() override {
    MpiTrainingTest::SetUp();
    if (world->rank() == 0)
      for (const char* name : {"train.bin", "val.bin"}) {
        auto f = data::TokenFile::open(dir / name);
        ASSERT_TRUE(f.is_ok());
        ASSERT_TRUE(data::write_loss_mask(data::loss_mask_path(dir / name), mask_of(f.value()->size())).is_ok());
      }
    world->barrier();
  }
  TrainConfig config(const std::string& out) const {
    TrainConfig cfg = testing::tiny_run_config(dir);
    cfg.data.sampler = "sequential";
    cfg.data.grad_accum_steps = 2;
    cfg.train.steps = 4;
    cfg.train.eval_interval = 2;
    cfg.train.out_dir = (dir / out).string();
    return cfg;
  }
};

// Sum and count of the cross-entropy over targets != -1 of `batch` under `model`.
std::pair<double, double> masked_ce(const models::CausalLM& model, const data::Batch& batch) {
  autograd::NoGradGuard no_grad;
  const Tensor logits = model.forward(batch.inputs);
  const std::vector<float> l = to_vector<float>(logits);
  const std::vector<int64_t> y = to_vector<int64_t>(batch.targets);
  const int64_t V = logits.size(-1);
  double sum = 0, count = 0;
  for (size_t r = 0; r < y.size(); ++r) {
    if (y[r] == -1) continue;
    double mx = -1e30, z = 0;
    for (int64_t v = 0; v < V; ++v) mx = std::max(mx, static_cast<double>(l[r * V + v]));
    for (int64_t v = 0; v < V; ++v) z += std::exp(l[r * V + v] - mx);
    sum += std::log(z) + mx - l[r * V + y[r]];
    ++count;
  }
  return {sum, count};
}

TEST_F(MaskedLossTest, TheLossIsTheMeanOverTrainedTargets) {
  if (world->size() != 1) GTEST_SKIP() << "the single-process reference";
  const TrainConfig cfg = config("single");
  // The step's two micro-batches as the trainer's sampler draws them, and the model it starts from.
  auto tokens = data::TokenFile::open(cfg.data.train_file);
  data::SequentialSampler sampler(tokens.value(), cfg.data.batch_size, cfg.data.seq_len);
  auto mask = data::LossMask::open_beside(cfg.data.train_file, tokens.value()->size());
  sampler.set_loss_mask(mask.value());
  const auto model = models::build_model(cfg.model);
  const auto [s0, c0] = masked_ce(*model, sampler.batch_at(0));
  const auto [s1, c1] = masked_ce(*model, sampler.batch_at(1));
  EXPECT_EQ(c0, 0.0) << "the first micro-batch must hold no trained target";
  ASSERT_GT(c1, 0.0);
  const std::vector<StepMetrics> steps = train_steps(cfg, nullptr);
  ASSERT_EQ(steps.size(), 4u);
  const double want = (s0 + s1) / (c0 + c1);
  std::printf("step 1: trident %.9f, reference %.9f over %g trained targets\n", steps[0].loss, want, c0 + c1);
  EXPECT_NEAR(steps[0].loss, want, 1e-5 * want);
  for (const StepMetrics& m : steps) EXPECT_TRUE(std::isfinite(m.loss) && std::isfinite(m.grad_norm));
}

TEST_F(MaskedLossTest, LayoutsGiveTheSingleProcessLosses) {
  if (world->size() == 1) GTEST_SKIP() << "no layout on one rank";
  struct Layout {
    const char* name;
    int64_t tp, pp, zero;
  };
  for (const Layout& l : {Layout{"dp", 1, 1, 0}, Layout{"dp_zero2", 1, 1, 2}, Layout{"tp2", 2, 1, 0},
                          Layout{"pp2", 1, 2, 0}, Layout{"tp2_pp2", 2, 2, 0}}) {
    if (world->size() % (l.tp * l.pp) != 0 || (l.zero > 0 && world->size() == l.tp * l.pp)) continue;
    if (l.tp * l.pp == 1 && world->size() > 2) continue;  // batch 8 over 4 data-parallel ranks: fine, but enough
    TrainConfig cfg = config(std::string("masked_") + l.name);
    cfg.parallel.tp = l.tp;
    cfg.parallel.pp = l.pp;
    cfg.parallel.zero_stage = l.zero;
    TrainConfig single = cfg;
    single.parallel = {};
    single.train.out_dir += "_single_rank" + std::to_string(world->rank());
    const Run ref = train(single, nullptr);
    const Run got = train(cfg, world);
    expect_close(got.losses, ref.losses, std::string("masked ") + l.name);
    expect_close(got.val, ref.val, std::string("masked ") + l.name + " validation");
  }
}

}  // namespace
}  // namespace trident::train
