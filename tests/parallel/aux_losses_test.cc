// Auxiliary losses end to end (nn/aux_outputs.h, the trainer's seed and collection): a
// test-only module, part hooks around GPT-2's blocks (nn/part_hooks.h) that add
// coefficient x mean(h^2) of each block's output h to the objective through the model's
// AuxOutputs, as a router adds its load-balancing loss.
//   - In one process, the same objective written directly into the loss (the root part's
//     hook adds the blocks' terms to the LM loss) trains the same: per step, the direct run's
//     loss is the attached run's LM loss plus coefficient x blocks x the mean aux value, and
//     the gradient norms agree, under gradient accumulation 2 in fp32 and fp16 (loss scaling):
//     a seed without 1/accum or without the loss scale fails it (the objective with twice the
//     coefficient is told apart, so the comparison can see a wrong scale at all).
//   - Under mpirun (2 and 4 ranks): data parallel, ZeRO-2, pipelines (1F1B; interleaved),
//     tensor parallelism, with accumulation 2 and one pipeline in fp16, give the one-process
//     attached run's losses within 1e-5 and its aux values within 1e-5 (fp16: 1e-3, its
//     values' own rounding).
//   - metrics.jsonl carries "aux": {"block_h_sq": mean} per step, what on_step saw (rank 0's
//     file of a distributed run too), and a run without aux values has no "aux" key.
//   - On the emulated device (values summed where they are) the host's numbers.
//
// Note [A mean, not a sum]
// Why mean(h^2) and not sum(h^2)? The trainer averages over data-parallel replicas, each of
// which holds its own rows, and the LM loss is a mean over rows for that reason: a sum over a
// replica's rows would make the objective depend on how many replicas split the batch, and no
// layout could give the one-process numbers. A router's load-balancing loss is normalized the
// same way.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/functions.h"
#include "nn/part_hooks.h"
#include "support/mpi_training_test.h"

namespace trident::train {
namespace {

constexpr double kCoefficient = 20.0;
constexpr const char* kName = "block_h_sq";

// The test-only module: every block's output h gets coefficient x mean(h^2) (Note [A mean,
// not a sum]), attached through the model's AuxOutputs (kAttach), or kept and added to the
// LM loss by the root part's hook (kDirect: loss() runs the whole forward inside part 0).
class BlockSquareLoss final : public nn::PartHooks {
 public:
  enum class Mode { kAttach, kDirect };
  BlockSquareLoss(models::CausalLM& model, Mode mode, double coefficient)
      : model_(model), mode_(mode), coefficient_(coefficient) {}

  Tensor run(size_t part, const nn::PartForward& forward, const Tensor& x) override {
    if (part == 0) {
      Tensor out = forward(x);
      if (mode_ == Mode::kDirect)
        for (const Tensor& term : terms_) out = out + to(term, out.dtype()) * coefficient_;  // fp16: f32 loss
      terms_.clear();
      return out;
    }
    const Tensor h = forward(x);
    const Tensor term = mean(h * h);
    if (mode_ == Mode::kAttach) return model_.aux_outputs().add_loss(kName, h, term, coefficient_);
    terms_.push_back(term);
    return h;
  }

 private:
  models::CausalLM& model_;
  Mode mode_;
  double coefficient_;
  std::vector<Tensor> terms_;  // kDirect: this forward's blocks' terms
};

struct AuxRun {
  std::vector<double> losses, grad_norms, aux;  // aux: NaN for a step without the value
};

class AuxLossesTest : public testing::MpiTrainingTest {
 protected:
  TrainConfig config(const std::string& out) const {
    TrainConfig cfg = testing::tiny_run_config(dir);
    cfg.data.grad_accum_steps = 2;
    cfg.data.val_file = "";  // training losses only (kDirect would add its terms to evaluations)
    cfg.train.steps = 6;
    cfg.train.out_dir = (dir / out).string();
    return cfg;
  }

  // A run of `cfg` with the module in `mode`.
  static AuxRun train_with(const TrainConfig& cfg, std::shared_ptr<comm::Communicator> comm, BlockSquareLoss::Mode mode,
                           std::optional<Device> device = std::nullopt, double coefficient = kCoefficient) {
    AuxRun r;
    std::unique_ptr<BlockSquareLoss> hooks;  // outlives the trainer, whose model points at it
    auto t = Trainer::create(cfg, std::move(comm), device);
    EXPECT_TRUE(t.is_ok()) << t.status().to_string();
    if (!t.is_ok()) return r;
    hooks = std::make_unique<BlockSquareLoss>(t.value()->model(), mode, coefficient);
    t.value()->model().set_part_hooks(hooks.get());
    t.value()->show_progress = false;
    t.value()->on_step = [&](const StepMetrics& m) {
      r.losses.push_back(m.loss);
      r.grad_norms.push_back(m.grad_norm);
      const auto it = m.aux.find(kName);
      r.aux.push_back(it == m.aux.end() ? std::numeric_limits<double>::quiet_NaN() : it->second);
      EXPECT_LE(m.aux.size(), 1u);
    };
    const Status s = t.value()->run();
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return r;
  }

  // The same config in one process (each rank its own run and out_dir).
  AuxRun single(TrainConfig cfg, BlockSquareLoss::Mode mode, std::optional<Device> device = std::nullopt,
                double coefficient = kCoefficient) const {
    cfg.parallel = {};
    cfg.train.out_dir += "_single_rank" + std::to_string(world->rank());
    return train_with(cfg, nullptr, mode, device, coefficient);
  }

  // metrics.jsonl's "aux" per step line (NaN where a line has none), and whether any line has one.
  static std::vector<double> aux_in_metrics(const std::string& out_dir, bool* any) {
    std::ifstream in(out_dir + "/metrics.jsonl");
    std::vector<double> v;
    std::string line;
    *any = false;
    while (std::getline(in, line)) {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (!j.contains("loss")) continue;
      *any = *any || j.contains("aux");
      v.push_back(j.contains("aux") ? j["aux"][kName].get<double>() : std::numeric_limits<double>::quiet_NaN());
    }
    return v;
  }

  static void expect_close(const std::vector<double>& a, const std::vector<double>& b, double rtol,
                           const std::string& what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_LE(std::abs(a[i] - b[i]), rtol * std::abs(b[i])) << what << ", step " << i + 1 << ": " << a[i] << " vs "
                                                              << b[i];
  }
};

TEST_F(AuxLossesTest, OneProcessTrainsTheObjectiveWrittenIntoTheLoss) {
  using Mode = BlockSquareLoss::Mode;
  for (const char* dtype : {"fp32", "fp16"}) {
    // The direct loss is an f32 sum of the LM loss and the terms (fp16's loss is f32 too): a
    // few roundings. The gradients are the same sums in the same order (bitwise, as it is).
    constexpr double kRtol = 1e-6;
    TrainConfig cfg = config(std::string("one_process_") + dtype);
    cfg.precision.dtype = dtype;
    if (std::string(dtype) == "fp16") cfg.precision.initial_loss_scale = 1024;  // no overflow: every step trains
    const AuxRun attached = single(cfg, Mode::kAttach);
    TrainConfig direct_cfg = cfg;
    direct_cfg.train.out_dir += "_direct";
    const AuxRun direct = single(direct_cfg, Mode::kDirect);
    ASSERT_EQ(attached.losses.size(), static_cast<size_t>(cfg.train.steps)) << dtype;
    std::vector<double> objective;
    for (size_t i = 0; i < attached.losses.size(); ++i)
      objective.push_back(attached.losses[i] + kCoefficient * static_cast<double>(cfg.model.n_layer) * attached.aux[i]);
    expect_close(objective, direct.losses, kRtol,
                 std::string(dtype) + ": LM loss + c x blocks x aux against the direct loss");
    expect_close(attached.grad_norms, direct.grad_norms, kRtol, std::string(dtype) + ": gradient norms");
    // The objective a seed without 1/accum would train (twice the coefficient) is told apart:
    // the first step's gradient (same weights) differs far beyond the tolerance.
    TrainConfig twice_cfg = cfg;
    twice_cfg.train.out_dir += "_twice";
    const AuxRun twice = single(twice_cfg, Mode::kDirect, std::nullopt, 2 * kCoefficient);
    EXPECT_GT(std::abs(twice.grad_norms.front() - attached.grad_norms.front()),
              1000 * kRtol * attached.grad_norms.front())
        << dtype << ": the aux loss moves the gradient too little for this test to see a wrong scale";

    // metrics.jsonl: the aux values on_step saw (written to read back exactly), none without them.
    const std::string rank = "_single_rank" + std::to_string(world->rank());
    bool any = false;
    EXPECT_EQ(aux_in_metrics(cfg.train.out_dir + rank, &any), attached.aux) << dtype;
    EXPECT_TRUE(any) << dtype;
    (void)aux_in_metrics(direct_cfg.train.out_dir + rank, &any);
    EXPECT_FALSE(any) << dtype << ": a run without aux values writes no \"aux\"";
  }
}

// The device path: values summed on the device (in fp32) and read once a step.
TEST_F(AuxLossesTest, OnTheEmulatedDeviceTheHostsNumbers) {
  const TrainConfig cfg = config("device");
  const AuxRun host = single(cfg, BlockSquareLoss::Mode::kAttach);
  TrainConfig device_cfg = cfg;
  device_cfg.train.out_dir += "_on_device";
  const AuxRun device = single(device_cfg, BlockSquareLoss::Mode::kAttach, testing::emulated_device());
  EXPECT_EQ(device.losses, host.losses);
  expect_close(device.aux, host.aux, 1e-6, "aux values on the device");
}

TEST_F(AuxLossesTest, LayoutsGiveTheOneProcessRun) {
  if (world->size() < 2) GTEST_SKIP() << "one rank: no layout to compare";
  struct Layout {
    const char* name;
    int64_t tp, pp, virtual_stages, zero;
    const char* dtype;
  };
  const Layout layouts[] = {{"dp", 1, 1, 1, 0, "fp32"},          {"zero2", 1, 1, 1, 2, "fp32"},
                            {"pp2_1f1b", 1, 2, 1, 0, "fp32"},    {"pp2_1f1b_fp16", 1, 2, 1, 0, "fp16"},
                            {"pp2_interleaved", 1, 2, 2, 0, "fp32"}, {"tp2", 2, 1, 1, 0, "fp32"},
                            {"tp2_pp2", 2, 2, 1, 0, "fp32"}};
  for (const Layout& l : layouts) {
    if (world->size() % (l.tp * l.pp) != 0) continue;
    if (l.zero > 0 && world->size() == l.tp * l.pp) continue;  // ZeRO needs data-parallel ranks
    TrainConfig cfg = config(std::string("layout_") + l.name);
    cfg.parallel.tp = l.tp;
    cfg.parallel.pp = l.pp;
    cfg.parallel.virtual_stages = l.virtual_stages;
    if (l.virtual_stages > 1) cfg.parallel.pipeline_schedule = "interleaved";
    cfg.model.n_layer = std::max<int64_t>(cfg.model.n_layer, l.pp * l.virtual_stages);
    cfg.parallel.zero_stage = l.zero;
    cfg.precision.dtype = l.dtype;
    if (std::string(l.dtype) == "fp16") cfg.precision.initial_loss_scale = 1024;
    const AuxRun ref = single(cfg, BlockSquareLoss::Mode::kAttach);
    const AuxRun got = train_with(cfg, world, BlockSquareLoss::Mode::kAttach);
    const std::string what = std::string(l.name) + " on " + std::to_string(world->size()) + " ranks";
    ASSERT_EQ(ref.losses.size(), static_cast<size_t>(cfg.train.steps)) << what;
    expect_close(got.losses, ref.losses, 1e-5, what + ": losses");
    // In fp16 each value is a mean(h^2) rounded to fp16 (2^-11), and data-parallel ranks round
    // their halves' means: the mean of two roundings is not the rounding of the whole's mean.
    expect_close(got.aux, ref.aux, std::string(l.dtype) == "fp16" ? 1e-3 : 1e-5, what + ": aux values");
    if (world->rank() == 0) {  // rank 0 writes the values merged over the ranks
      bool any = false;
      EXPECT_EQ(aux_in_metrics(cfg.train.out_dir, &any), got.aux) << what;
    }
  }
}

}  // namespace
}  // namespace trident::train
