// The per-step alert conditions (monitor/step_conditions.h) on hand-made sequences, and the
// checks of [[alerts]] tables that involve them.
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "core/check.h"
#include "monitor/step_conditions.h"

namespace trident::monitor {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

AlertRule rule(const std::string& condition, int64_t window = 5, double threshold = 4.0) {
  AlertRule r;
  r.name = condition + "_rule";
  r.condition = condition;
  r.window = window;
  r.threshold = threshold;
  r.actions = "log";
  return r;
}

// The steps (1-based) at which `c` fires on losses `xs` (grad norm 1, 1000 tokens/s).
std::vector<int64_t> fires_on_losses(StepCondition& c, const std::vector<double>& xs) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < xs.size(); ++i)
    if (c.observe({static_cast<int64_t>(i) + 1, xs[i], 1.0, 1000.0, false})) out.push_back(static_cast<int64_t>(i) + 1);
  return out;
}

TEST(StepConditions, NotFiniteFiresOnTheFirstBadStepOfEachStretch) {
  StepCondition c(rule("not_finite"));
  EXPECT_EQ(fires_on_losses(c, {3, 2.9, kNaN, kNaN, 2.8, kInf, 2.7}), (std::vector<int64_t>{3, 6}));
  // A NaN gradient norm with a finite loss fires too, naming the gradient norm ...
  StepCondition g(rule("not_finite"));
  std::optional<AlertEvent> e = g.observe({7, 2.5, kNaN, 1000, false});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->metric, "grad_norm");
  EXPECT_EQ(e->step, 7);
  EXPECT_NE(e->message().find("alert 'not_finite_rule' (not_finite) at step 7: loss 2.5, gradient norm nan"),
            std::string::npos) << e->message();
  // ... but not on a step the fp16 loss scaler skipped (inf gradients are its signal).
  StepCondition f(rule("not_finite"));
  EXPECT_FALSE(f.observe({1, 2.5, kInf, 1000, /*skipped=*/true}));
}

TEST(StepConditions, LossSpikeNeedsAFullWindowFiresOnceThenStaysQuiet) {
  StepCondition c(rule("loss_spike", /*window=*/5, /*threshold=*/4.0));
  // A falling loss never spikes; the window fills at step 5; step 8 spikes (z >> 4); steps 9-10
  // stay high but the rule is quiet for 5 steps; step 16 spikes again after the quiet steps
  // (the high values joined the window, so it must stand out from them too).
  const std::vector<double> xs = {9, 7, 5, 4, 3.5, 3.4, 3.45, 8.0, 8.1, 7.9, 3.4, 3.42, 3.41, 3.4, 3.43, 30.0};
  EXPECT_EQ(fires_on_losses(c, xs), (std::vector<int64_t>{8, 16}));
  // A very early spike goes unnoticed: the window is not full yet.
  StepCondition early(rule("loss_spike", 5, 4.0));
  EXPECT_EQ(fires_on_losses(early, {3, 3.1, 50, 3, 3.1}), std::vector<int64_t>{});
}

TEST(StepConditions, LossSpikeEventCarriesTheBaselineAndNonFiniteIsNotASpike) {
  StepCondition c(rule("loss_spike", 4, 3.0));
  for (int64_t s = 1; s <= 4; ++s) EXPECT_FALSE(c.observe({s, s % 2 ? 2.0 : 2.2, 1, 1, false}));
  EXPECT_FALSE(c.observe({5, kNaN, 1, 1, false}));  // not_finite's business
  std::optional<AlertEvent> e = c.observe({6, 5.0, 1, 1, false});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->step, 6);
  EXPECT_DOUBLE_EQ(e->value, 5.0);
  EXPECT_DOUBLE_EQ(e->best, 2.1);  // the window's mean
  EXPECT_NE(e->json().find("\"condition\":\"loss_spike\",\"metric\":\"loss\",\"step\":6,\"value\":5.0,\"baseline\":"),
            std::string::npos)
      << e->json();
  // A rollback to step 4 keeps the window of steps 1..4 (Note [Spike counting]): the replayed
  // step 5 is judged at once, against the same baseline.
  c.rollback_to(4);
  std::optional<AlertEvent> again = c.observe({5, 5.0, 1, 1, false});
  ASSERT_TRUE(again);
  EXPECT_DOUBLE_EQ(again->best, 2.1);
}

TEST(StepConditions, RollbackDropsTheDiscardedStepsFromTheWindow) {
  // Steps 1..4 at about 2, steps 5..9 at about 4 (step 5 fires; 6..9 join the window in the
  // quiet steps, so 4.1 at step 9 is no spike), a rollback to step 4: the window is steps 1..4
  // again, and 4.1 is a spike against their baseline.
  StepCondition c(rule("loss_spike", 4, 3.0));
  for (int64_t s = 1; s <= 4; ++s) EXPECT_FALSE(c.observe({s, s % 2 ? 2.0 : 2.1, 1, 1, false}));
  for (int64_t s = 5; s <= 8; ++s) c.observe({s, 4.0 + 0.01 * static_cast<double>(s), 1, 1, false});
  EXPECT_FALSE(c.observe({9, 4.1, 1, 1, false}));
  c.rollback_to(4);
  std::optional<AlertEvent> e = c.observe({5, 4.1, 1, 1, false});
  ASSERT_TRUE(e);
  EXPECT_DOUBLE_EQ(e->best, 2.05);
}

TEST(StepConditions, RollbackLimitPassesOverASpentCheckpointThenSaysNone) {
  AlertRule r = rule("loss_spike", 4, 3.0);
  r.rollback_limit = 2;
  r.rollback_window = 100;
  StepCondition c(r);
  const std::vector<int64_t> ckpts = {10, 20, 30};
  EXPECT_EQ(c.rollback_target(40, ckpts), std::optional<int64_t>(30));
  c.record_rollback(40, 30);
  EXPECT_EQ(c.rollback_target(40, ckpts), std::optional<int64_t>(30));
  c.record_rollback(40, 30);
  EXPECT_EQ(c.rollback_target(40, ckpts), std::optional<int64_t>(20));  // 30 spent: further back
  c.record_rollback(40, 20);
  c.record_rollback(40, 20);
  c.record_rollback(40, 10);
  c.record_rollback(40, 10);
  EXPECT_EQ(c.rollback_target(40, ckpts), std::nullopt);  // all spent: diverged
  EXPECT_EQ(c.rollbacks_text(40), "2 to step 30, 2 to step 20, 2 to step 10");
  // Far enough on, the old rollbacks no longer count; the state survives a checkpoint.
  EXPECT_EQ(c.rollback_target(140, {10, 20, 30, 130}), std::optional<int64_t>(130));
  StepCondition restored(r);
  restored.restore(c.state());
  EXPECT_EQ(restored.rollback_target(40, ckpts), std::nullopt);
  EXPECT_EQ(restored.state(), c.state());
}

TEST(StepConditions, GradNormSpikeWatchesTheGradientNorm) {
  StepCondition c(rule("grad_norm_spike", 3, 4.0));
  std::vector<int64_t> fired;
  const std::vector<double> norms = {1.0, 1.1, 0.9, 1.0, 9.0};
  for (size_t i = 0; i < norms.size(); ++i)
    if (c.observe({static_cast<int64_t>(i) + 1, 50.0 /* a loss spike: ignored */, norms[i], 1, false}))
      fired.push_back(static_cast<int64_t>(i) + 1);
  EXPECT_EQ(fired, std::vector<int64_t>{5});
}

TEST(StepConditions, ThroughputDropAgainstTheRunsMedian) {
  AlertRule r = rule("throughput_drop", /*window=*/4);
  r.fraction = 0.5;
  StepCondition c(r);
  // At step 6 the median of 1000, 1100, 900, 1050, 5000 (one fast outlier) is 1050 and 600 is
  // above half of it; at step 7 the median of the six before is 1025 and 400 is below half of
  // it; the quiet window then hides the next slow steps.
  const std::vector<double> tps = {1000, 1100, 900, 1050, 5000, 600, 400, 300, 300};
  std::vector<int64_t> fired;
  for (size_t i = 0; i < tps.size(); ++i)
    if (std::optional<AlertEvent> e = c.observe({static_cast<int64_t>(i) + 1, 3, 1, tps[i], false})) {
      fired.push_back(e->step);
      EXPECT_DOUBLE_EQ(e->best, 1025.0);
    }
  EXPECT_EQ(fired, std::vector<int64_t>{7});
}

TEST(StepConditions, ExpertCollapseNeedsWindowStepsInARowAboveFraction) {
  AlertRule r = rule("expert_collapse", /*window=*/3);
  r.fraction = 0.5;
  StepCondition c(r);
  // Steps 2-3 above, 4 below (the run restarts), 5-7 above: fires at 7; then quiet for 3 steps
  // (8-10), so 8-12 above fires next at 13; a dense step (NaN) resets the run.
  const std::vector<double> load = {0.3, 0.6, 0.7, 0.4, 0.6, 0.8, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, kNaN, 0.9};
  std::vector<int64_t> fired;
  for (size_t i = 0; i < load.size(); ++i) {
    StepSample s{static_cast<int64_t>(i) + 1, 3, 1, 1000, false};
    s.max_expert_load = load[i];
    if (std::optional<AlertEvent> e = c.observe(s)) {
      fired.push_back(e->step);
      EXPECT_EQ(e->metric, "moe_max_load");
      EXPECT_DOUBLE_EQ(e->best, 0.5);
      EXPECT_NE(e->detail.find("for 3 steps in a row"), std::string::npos) << e->detail;
    }
  }
  EXPECT_EQ(fired, (std::vector<int64_t>{7, 13}));
  // A dense model's steps never fire it.
  StepCondition dense(r);
  for (int64_t i = 1; i <= 10; ++i) EXPECT_FALSE(dense.observe({i, 3, 1, 1000, false}));
}

TEST(StepConditions, StragglerIsTheRankAboveFactorTimesTheMedian) {
  AlertRule r = rule("straggler", /*window=*/2);
  r.factor = 3.0;
  StepCondition c(r);
  EXPECT_FALSE(c.observe({1, 3, 1, 1, false}));  // per-step samples say nothing about ranks
  EXPECT_FALSE(c.observe_ranks(1, {{0.10, 0.12, 0.11, 0.29}, {}, {}}));  // 2.5 x the median: not yet
  std::optional<AlertEvent> e = c.observe_ranks(2, {{0.10, 0.12, 0.11, 0.50}, {}, {}});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->step, 2);
  EXPECT_DOUBLE_EQ(e->value, 0.50);
  EXPECT_DOUBLE_EQ(e->best, 0.115);
  EXPECT_NE(e->message().find("rank 3 took 0.5 s of step 2"), std::string::npos) << e->message();
  EXPECT_FALSE(c.observe_ranks(3, {{0.10, 0.9, 0.11, 0.1}, {}, {}}));  // quiet for `window` steps
  EXPECT_FALSE(c.observe_ranks(4, {{0.10, 0.9, 0.11, 0.1}, {}, {}}));
  e = c.observe_ranks(5, {{0.10, 0.9, 0.11, 0.1}, {}, {}});
  ASSERT_TRUE(e);
  EXPECT_NE(e->message().find("rank 1 took"), std::string::npos) << e->message();
  EXPECT_FALSE(c.observe_ranks(6, {{0.5}, {}, {}}));  // one rank has no peers
}

TEST(StepConditions, MemoryHighNamesTheFullestHost) {
  AlertRule r = rule("memory_high", /*window=*/1);
  r.memory_fraction = 0.9;
  StepCondition c(r);
  EXPECT_FALSE(c.observe_ranks(1, {{}, {0.5, 0.89, std::nan("")}, {}}));
  std::optional<AlertEvent> e = c.observe_ranks(2, {{}, {0.5, 0.95, 0.97, 0.97}, {}});
  ASSERT_TRUE(e);
  EXPECT_NE(e->message().find("the host of rank 2 has used 0.97 of its memory at step 2"), std::string::npos)
      << e->message();
  EXPECT_FALSE(c.observe_ranks(3, {{}, {0.99}, {}}));  // quiet for `window` steps
  EXPECT_TRUE(c.observe_ranks(4, {{}, {0.99}, {}}));
}

// The device allocator's share of the device's limit counts as well, and the fuller memory
// of either kind is the one named; NaN (no device, no limit) never fires.
TEST(StepConditions, MemoryHighWatchesTheDeviceLimit) {
  AlertRule r = rule("memory_high", /*window=*/0);
  r.memory_fraction = 0.9;
  StepCondition c(r);
  const double nan = std::nan("");
  EXPECT_FALSE(c.observe_ranks(1, {{}, {0.5, 0.5}, {nan, 0.89}}));
  std::optional<AlertEvent> e = c.observe_ranks(2, {{}, {0.5, 0.5}, {nan, 0.93}});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->metric, "device_memory_reserved_ratio");
  EXPECT_DOUBLE_EQ(e->value, 0.93);
  EXPECT_NE(e->message().find("the device allocator of rank 1 holds 0.93 of the device's limit at step 2"),
            std::string::npos)
      << e->message();
  e = c.observe_ranks(3, {{}, {0.95, 0.5}, {nan, 0.93}});  // the host is fuller
  ASSERT_TRUE(e);
  EXPECT_EQ(e->metric, "host_memory_used_ratio");
  EXPECT_NE(e->message().find("the host of rank 0 has used 0.95"), std::string::npos) << e->message();
}

// validate()'s message for `r` (or "accepted").
std::string refusal(const AlertRule& r) {
  try {
    r.validate();
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

TEST(AlertRules, RollbackNeedsAStepConditionAndActionsAreChecked) {
  AlertRule r = rule("plateau");
  r.actions = "log,rollback_and_skip";
  EXPECT_NE(refusal(r).find("rollback_and_skip needs a per-step condition"), std::string::npos) << refusal(r);
  r.condition = "hang";
  r.actions = "log,pause";
  EXPECT_NE(refusal(r).find("action 'pause' cannot act on a hang"), std::string::npos) << refusal(r);
  r.condition = "loss_spike";
  r.actions = "log,rollback_and_skip";
  EXPECT_EQ(refusal(r), "accepted");
  r.actions = "log,rollback";
  EXPECT_NE(refusal(r).find("unknown action 'rollback' in actions = \"log,rollback\": allowed: log, notify, "
                            "checkpoint, pause, stop, rollback_and_skip"),
            std::string::npos)
      << refusal(r);
}

}  // namespace
}  // namespace trident::monitor

namespace trident::monitor {
namespace {

TEST(PlateauState, StateSurvivesACheckpoint) {
  // Note [Alert state in checkpoints]: a restored rule goes on counting where it stood.
  AlertRule r;
  r.patience = 3;
  PlateauState live(r);
  EXPECT_FALSE(live.observe(2, 5.0));  // the best
  EXPECT_FALSE(live.observe(4, 5.0));  // 1 without improvement
  PlateauState restored(r);
  restored.restore(live.state());
  EXPECT_EQ(restored.state(), live.state());
  EXPECT_FALSE(restored.observe(6, 5.0));  // 2
  std::optional<AlertEvent> e = restored.observe(8, 5.0);  // 3: fires, as the live one would
  ASSERT_TRUE(e);
  EXPECT_EQ(e->best_step, 2);
  EXPECT_THROW(restored.restore(nlohmann::json{{"best", 1.0}}), Error);  // names the rule
}

}  // namespace
}  // namespace trident::monitor
