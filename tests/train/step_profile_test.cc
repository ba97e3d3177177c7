// The per-op profile of a training step (core/profiler.h, train/step_profile.h) on a tiny
// GPT-2: every op's forward and backward appears under its registered name with the call
// count the model's structure gives, in the right phase (recompute under activation
// checkpointing), and the times are consistent (self times are disjoint parts of the wall
// time; no threshold on the coverage). (The trainer's train.profile_step:
// tests/train/trainer_test.cc.)
#include "train/step_profile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include <nlohmann/json.hpp>

#include "autograd/functions.h"
#include "core/factory.h"
#include "core/profiler.h"
#include "core/rng.h"
#include "models/gpt2/model.h"
#include "optim/adamw.h"
#include "optim/clip_grad.h"
#include "optim/mixed_precision.h"

namespace trident::train {
namespace {

using profiler::Phase;
using profiler::ProfileReport;

constexpr int64_t kLayers = 2;

models::gpt2::GPT2Config tiny_model(const std::string& checkpointing = "none") {
  models::gpt2::GPT2Config cfg;
  cfg.n_layer = kLayers;
  cfg.n_head = 2;
  cfg.n_embd = 32;
  cfg.block_size = 16;
  cfg.vocab_size = 64;
  cfg.activation_checkpointing = checkpointing;
  return cfg;
}

int64_t calls(const ProfileReport& r, const char* name, Phase phase) {
  const profiler::ProfileRow* row = r.find(name, phase);
  return row ? row->calls : 0;
}

// What holds by construction whatever the timing (core/profiler.cc): every scope opens and
// closes on the recording thread inside the session's [start(), stop()] interval, a scope's
// self time is its elapsed time less that of the scopes nested directly in it, so the self
// times are disjoint parts of the wall time; a row's total time adds only its outermost
// frames, disjoint too. No threshold on how much of the step the rows explain: a step of a
// tiny model takes milliseconds, and one preemption between two scopes on a loaded machine
// would move the coverage anywhere.
void expect_consistent(const ProfileReport& r) {
  const double eps = 1e-9 * std::max(1.0, r.wall_ms);  // ns -> ms conversions, summed in double
  EXPECT_GT(r.wall_ms, 0.0);
  EXPECT_FALSE(r.rows.empty());
  EXPECT_GT(r.self_ms(), 0.0);
  EXPECT_LE(r.self_ms(), r.wall_ms + eps);
  EXPECT_GT(r.coverage(), 0.0);
  EXPECT_LE(r.coverage(), 1.0 + 1e-9);
  double by_phase = 0.0;
  for (int p = 0; p < profiler::kNumPhases; ++p) by_phase += r.phase_ms(static_cast<Phase>(p));
  EXPECT_NEAR(by_phase, r.self_ms(), eps);
  for (const profiler::ProfileRow& row : r.rows) {
    EXPECT_GE(row.calls, 1) << row.name;
    EXPECT_GE(row.self_ms, 0.0) << row.name;
    EXPECT_LE(row.self_ms, row.total_ms + eps) << row.name;
    EXPECT_LE(row.total_ms, r.wall_ms + eps) << row.name;
  }
}

// One training step as the trainer takes it (forward, backward, clip, AdamW, zero_grad),
// after a first unprofiled one, with the second profiled. bf16: fp32 masters, as the trainer.
ProfileReport profile_step(const models::gpt2::GPT2Config& cfg, const std::string& precision = "fp32") {
  models::gpt2::GPT2 model(cfg);
  model.train();
  optim::PrecisionOptions p;
  p.dtype = precision;
  std::optional<optim::MasterWeights> master;
  if (p.mixed()) master.emplace(model.named_parameters(), p.compute_dtype());
  optim::AdamW opt(master ? master->masters() : model.named_parameters(), optim::AdamWOptions{});
  const std::vector<Tensor> params = master ? master->master_tensors() : model.parameters();
  Generator gen(7);
  ProfileReport report;
  for (int step = 0; step < 2; ++step) {
    const Tensor idx = randint(0, cfg.vocab_size, {4, cfg.block_size}, gen);
    const Tensor targets = randint(0, cfg.vocab_size, {4, cfg.block_size}, gen);
    std::optional<profiler::ProfileSession> session;
    if (step == 1) session.emplace();
    {
      const Tensor loss = model.loss(idx, targets);
      autograd::backward(loss);
    }
    optim::clip_grad_norm_(params, 1.0);
    if (master) {
      master->step(opt, 1e-3);
      master->zero_grads();
    } else {
      opt.step(1e-3);
    }
    model.zero_grad();
    if (session) report = session->stop();
  }
  return report;
}

TEST(StepProfile, TinyGpt2StepHasEveryOpWithItsCallCount) {
  const ProfileReport r = profile_step(tiny_model());
  SCOPED_TRACE(r.table(100));
  const int64_t L = kLayers;
  // Forward: two norms per block and the final one; four matrix products per block (the MLP's
  // first fused with its GELU); the embeddings and the fused head + loss.
  EXPECT_EQ(calls(r, "layernorm", Phase::kForward), 2 * L + 1);
  EXPECT_EQ(calls(r, "linear", Phase::kForward), 3 * L);
  EXPECT_EQ(calls(r, "linear_gelu_tanh", Phase::kForward), L);
  EXPECT_EQ(calls(r, "attention", Phase::kForward), L);
  EXPECT_EQ(calls(r, "add", Phase::kForward), 2 * L + 1);  // residuals and wte + wpe
  EXPECT_EQ(calls(r, "embedding", Phase::kForward), 2);
  EXPECT_EQ(calls(r, "linear_cross_entropy", Phase::kForward), 1);
  // Backward: one node per recorded op, under the same name.
  EXPECT_EQ(calls(r, "layernorm", Phase::kBackward), 2 * L + 1);
  EXPECT_EQ(calls(r, "linear", Phase::kBackward), 3 * L);
  EXPECT_EQ(calls(r, "linear_gelu_tanh", Phase::kBackward), L);
  EXPECT_EQ(calls(r, "attention", Phase::kBackward), L);
  EXPECT_EQ(calls(r, "add", Phase::kBackward), 2 * L + 1);
  EXPECT_EQ(calls(r, "embedding", Phase::kBackward), 2);
  EXPECT_EQ(calls(r, "linear_cross_entropy", Phase::kBackward), 1);
  const int64_t n_params = static_cast<int64_t>(models::gpt2::GPT2(tiny_model()).parameters().size());
  EXPECT_EQ(calls(r, "AccumulateGrad", Phase::kBackward), n_params);
  EXPECT_EQ(calls(r, "autograd.engine", Phase::kBackward), 1);
  // The optimizer.
  EXPECT_EQ(calls(r, "clip_grad_norm", Phase::kOptimizer), 1);
  EXPECT_EQ(calls(r, "adamw.step", Phase::kOptimizer), 1);
  EXPECT_EQ(calls(r, "zero_grad", Phase::kOptimizer), 1);
  // Nothing recomputed, nothing communicated.
  EXPECT_EQ(r.phase_ms(Phase::kRecompute), 0.0);
  EXPECT_EQ(r.phase_ms(Phase::kCommunication), 0.0);
  // Self times are disjoint parts of the wall time (no timing threshold: expect_consistent).
  expect_consistent(r);
  EXPECT_GT(r.phase_ms(Phase::kForward), 0.0);
  EXPECT_GT(r.phase_ms(Phase::kBackward), 0.0);
  EXPECT_GT(r.phase_ms(Phase::kOptimizer), 0.0);

  const nlohmann::json j = nlohmann::json::parse(step_profile_json(r, 2, 0, 1));
  EXPECT_EQ(j["step"], 2);
  EXPECT_EQ(j["rows"].size(), r.rows.size());
  EXPECT_DOUBLE_EQ(j["coverage"].get<double>(), r.coverage());
}

// Full checkpointing reruns each block's forward inside its backward: the rerun's ops are
// phase recompute, the first run's forward; the backward nodes are those of the rerun.
TEST(StepProfile, ActivationCheckpointingShowsTheRerunAsRecompute) {
  const ProfileReport r = profile_step(tiny_model("full"));
  SCOPED_TRACE(r.table(100));
  const int64_t L = kLayers;
  EXPECT_EQ(calls(r, "activation_checkpoint", Phase::kForward), L);
  EXPECT_EQ(calls(r, "activation_checkpoint", Phase::kBackward), L);
  EXPECT_EQ(calls(r, "layernorm", Phase::kForward), 2 * L + 1);
  EXPECT_EQ(calls(r, "layernorm", Phase::kRecompute), 2 * L);
  EXPECT_EQ(calls(r, "layernorm", Phase::kBackward), 2 * L + 1);
  EXPECT_EQ(calls(r, "linear", Phase::kRecompute), 3 * L);
  EXPECT_EQ(calls(r, "attention", Phase::kRecompute), L);
  EXPECT_EQ(calls(r, "attention", Phase::kBackward), L);
  // The outer backward and one per block's rerun.
  EXPECT_EQ(calls(r, "autograd.engine", Phase::kBackward), 1 + L);
  EXPECT_GT(r.phase_ms(Phase::kRecompute), 0.0);
  EXPECT_GT(r.phase_ms(Phase::kForward), 0.0);
  EXPECT_GT(r.phase_ms(Phase::kBackward), 0.0);
  expect_consistent(r);
}

TEST(StepProfile, MixedPrecisionShowsTheMasterWeights) {
  const ProfileReport r = profile_step(tiny_model(), "bf16");
  SCOPED_TRACE(r.table(100));
  const int64_t n_params = static_cast<int64_t>(models::gpt2::GPT2(tiny_model()).parameters().size());
  EXPECT_EQ(calls(r, "master.fold_grad", Phase::kOptimizer), n_params);
  // On the host each master is copied into the model right after its update (one scope each).
  EXPECT_EQ(calls(r, "master.copy_to_model", Phase::kOptimizer), n_params);
  EXPECT_EQ(calls(r, "master.zero_grads", Phase::kOptimizer), 1);
  EXPECT_EQ(calls(r, "adamw.step", Phase::kOptimizer), 1);
  EXPECT_EQ(calls(r, "layernorm", Phase::kForward), 2 * kLayers + 1);
  EXPECT_EQ(calls(r, "layernorm", Phase::kBackward), 2 * kLayers + 1);
  EXPECT_EQ(calls(r, "clip_grad_norm", Phase::kOptimizer), 1);
  EXPECT_GT(r.phase_ms(Phase::kOptimizer), 0.0);
  expect_consistent(r);
}

TEST(StepProfile, EvaluationUnderNoGradCountsTheForward) {
  models::gpt2::GPT2 model(tiny_model());
  model.eval();
  Generator gen(3);
  const Tensor idx = randint(0, 64, {2, 16}, gen);
  profiler::ProfileSession session;
  {
    autograd::NoGradGuard no_grad;
    (void)model.loss(idx, idx).item();
  }
  const ProfileReport r = session.stop();
  EXPECT_EQ(calls(r, "layernorm", Phase::kForward), 2 * kLayers + 1);
  EXPECT_EQ(r.phase_ms(Phase::kBackward), 0.0);
  expect_consistent(r);
}

TEST(StepProfile, PathsAndTableNameTheRank) {
  EXPECT_EQ(step_profile_path("out", 5, 0), "out/profile_step5.json");
  EXPECT_EQ(step_profile_path("out", 5, 3), "out/profile_step5.rank3.json");
  ProfileReport r;
  r.wall_ms = 2.0;
  r.rows = {{"linear", Phase::kForward, 1, 1.0, 1.0}};
  EXPECT_NE(step_profile_table(r, 5, 1, 4).find("profile of step 5 on rank 1 of 4"), std::string::npos);
  EXPECT_EQ(step_profile_table(r, 5, 0, 1).find("rank"), std::string::npos);
}

}  // namespace
}  // namespace trident::train
