// The planner on a mixture of experts (issue #51): a Mixtral- and a Qwen2-MoE-shaped llama are
// planned (no refusal), their layouts range over expert parallelism (ep dividing the experts,
// as the trainer's check says; ep = 1 only for a dense model), a pinned ep holds in every
// layout ranked and round-trips through --layout's words, and the models count what expert
// parallelism places: each ep rank's experts, the experts' state sharded over dp alone, the
// rows' exchanges in the step time. The memory against the allocator is
// tests/planner_mpi/memory_accuracy_test's.
#include <gtest/gtest.h>

#include <set>

#include "planner/layout_pins.h"
#include "planner/memory_model.h"
#include "planner/plan.h"
#include "planner/time_model.h"
#include "support/planner_runs.h"
#include "support/tiny_model_configs.h"

namespace trident::planner {
namespace {

using testing::gpt_run;

// A llama of 4 layers of `model`'s family values, as the planner sees it.
RunSpec moe_run(const models::ModelConfig& model, int64_t G) {
  RunSpec run = gpt_run(4, 64, 4, 32, G);
  run.model = model;
  run.model.n_layer = 4;
  run.model.n_embd = 64;
  run.model.block_size = 32;
  run.shapes = models::model_family("llama").shapes(run.model);
  return run;
}

Plan plan_of(const RunSpec& run, int64_t ranks, const LayoutPins& pins = {}) {
  SearchSpace space;
  space.ranks = ranks;
  space.pins = pins;
  return make_plan(run, local_cluster(ranks), space, ranks > 1);
}

TEST(MoePlan, AMixtureOfExpertsIsPlannedOverEveryEpThatDividesItsExperts) {
  for (const models::ModelConfig& model : {models::testing::tiny_mixtral(), models::testing::tiny_qwen2_moe()}) {
    const RunSpec run = moe_run(model, 8);
    ASSERT_EQ(run.shapes.experts, 4);
    ASSERT_GT(run.shapes.sparse_blocks, 0);
    for (int64_t ranks : {1, 2, 4, 8}) {
      SCOPED_TRACE(std::to_string(ranks) + " ranks, " + std::to_string(run.shapes.sparse_blocks) + " sparse blocks");
      SearchSpace space;
      space.ranks = ranks;
      std::set<int64_t> eps;
      for (const Layout& l : enumerate_layouts(run, space)) {
        eps.insert(l.ep);
        EXPECT_EQ(l.ranks(), ranks) << l.str();
        EXPECT_EQ(run.shapes.experts % l.ep, 0) << l.str();
        EXPECT_TRUE(trainer_accepts(run.model, run.seq_len, l)) << l.str();
      }
      // Every ep the trainer allows today (with tp = pp = 1): the divisors of 4 up to the ranks.
      std::set<int64_t> expected;
      for (int64_t ep : {1, 2, 4})
        if (ep <= ranks) expected.insert(ep);
      EXPECT_EQ(eps, expected);
      const Plan plan = plan_of(run, ranks);
      ASSERT_TRUE(plan.search.best.has_value()) << no_layout_reason(plan);
    }
  }
  // A dense model's layouts keep ep = 1.
  SearchSpace space;
  space.ranks = 4;
  for (const Layout& l : enumerate_layouts(gpt_run(4, 64, 4, 32, 8), space)) EXPECT_EQ(l.ep, 1) << l.str();
}

TEST(MoePlan, APinnedEpHoldsInEveryRankedLayoutAndRoundTrips) {
  const RunSpec run = moe_run(models::testing::tiny_mixtral(), 8);
  auto pins = parse_layout_pins("dp2 ep2 zero1");
  ASSERT_TRUE(pins.is_ok()) << pins.status().to_string();
  const Plan plan = plan_of(run, 4, pins.value());
  ASSERT_FALSE(plan.ranked.empty()) << no_layout_reason(plan);
  for (const Candidate& c : plan.ranked) {
    EXPECT_EQ(c.layout.ep, 2) << c.layout.str();
    EXPECT_EQ(c.layout.dp, 2) << c.layout.str();
    EXPECT_EQ(c.layout.zero_stage, 1) << c.layout.str();
    const auto back = parse_layout_pins(c.layout.str());
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    EXPECT_TRUE(back.value().admits(c.layout));
    EXPECT_EQ(back.value().ep.value_or(1), 2);
  }
  EXPECT_NE(plan.ranked.front().layout.str().find("dp2 ep2 tp1 pp1 zero1"), std::string::npos);
  // Expert parallelism with tensor and pipeline parallelism are layouts the trainer runs too.
  for (const char* other : {"ep2 tp2", "ep2 pp2"}) {
    const Plan with = plan_of(run, 4, parse_layout_pins(other).value());
    ASSERT_FALSE(with.ranked.empty()) << other << ": " << no_layout_reason(with);
    EXPECT_NE(with.ranked.front().layout.str().find(std::string("dp1 ") + (other[4] == 't' ? "ep2 tp2 pp1" : "ep2 tp1 pp2")),
              std::string::npos)
        << with.ranked.front().layout.str();
  }
  // An ep that does not divide the experts, and ep on a dense model: the trainer's message.
  const RunSpec twelve = moe_run(models::testing::tiny_mixtral(), 12);
  auto three = parse_layout_pins("ep3");
  ASSERT_TRUE(three.is_ok());
  EXPECT_TRUE(plan_of(twelve, 3, three.value()).ranked.empty());
  const std::string why3 = why_no_pinned_layout(twelve, 3, three.value());
  EXPECT_NE(why3.find("must divide the 4 experts"), std::string::npos) << why3;
  const RunSpec dense = gpt_run(4, 64, 4, 32, 8);
  const std::string why = why_no_pinned_layout(dense, 2, parse_layout_pins("ep2").value());
  EXPECT_NE(why.find("num_local_experts"), std::string::npos) << why;
  // --parallel.ep pins it as the --layout word does.
  train::TrainConfig cfg;
  cfg.parallel.ep = 4;
  EXPECT_EQ(pins_from_overrides(cfg, {"--parallel.ep=4"}).ep, 4);
  EXPECT_EQ(layout_of(cfg, 8).dp, 2);
}

// Each ep rank holds E / ep experts and every dense parameter; the experts' gradients and
// optimizer state are ZeRO-sharded over dp alone, the dense ones over dp x ep.
TEST(MoePlan, ExpertParallelismPlacesEachRanksExperts) {
  const RunSpec run = moe_run(models::testing::tiny_mixtral(), 8);
  int64_t experts = 0, dense = 0;
  for (const models::ParameterShape& p : run.shapes.parameters) (p.expert >= 0 ? experts : dense) += p.numel();
  ASSERT_GT(experts, 0);
  auto layout = [](int64_t dp, int64_t ep, int64_t zero) {
    Layout l;
    l.dp = dp;
    l.ep = ep;
    l.zero_stage = zero;
    l.micro_batch = 8 / (dp * ep);
    return l;
  };
  auto category = [&](const Layout& l, MemoryCategory c) { return predict_memory(run, l, true).category(c); };
  // ZeRO-0: the parameters are what the rank holds, in fp32.
  EXPECT_EQ(category(layout(1, 1, 0), MemoryCategory::kParameter), 4 * (dense + experts));
  EXPECT_EQ(category(layout(1, 2, 0), MemoryCategory::kParameter), 4 * (dense + experts / 2));
  EXPECT_EQ(category(layout(1, 4, 0), MemoryCategory::kParameter), 4 * (dense + experts / 4));
  // ZeRO-3 on 4 ranks, ep 2 x dp 2: AdamW's moments of half the dense and half the rank's
  // experts (padding aside).
  const int64_t state = category(layout(2, 2, 3), MemoryCategory::kOptimizerState);
  EXPECT_NEAR(static_cast<double>(state), 8.0 * (static_cast<double>(dense) / 4.0 + static_cast<double>(experts) / 4.0),
              8.0 * 64.0 * static_cast<double>(run.shapes.parameters.size()));
  // ep 4 (dp 1): the experts' state is not sharded, the dense state over 4.
  const int64_t ep4 = category(layout(1, 4, 1), MemoryCategory::kOptimizerState);
  EXPECT_NEAR(static_cast<double>(ep4), 8.0 * (static_cast<double>(dense) / 4.0 + static_cast<double>(experts) / 4.0),
              8.0 * 64.0 * static_cast<double>(run.shapes.parameters.size()));
  // The routed rows' activations: k = 2 rows per token through the experts, whatever ep.
  EXPECT_GT(category(layout(1, 1, 0), MemoryCategory::kActivation), 0);
  // The step time: the rows' exchanges over ep are communication a dp-only layout has not.
  const Cluster cluster = local_cluster(4);
  const TimeEstimate ep_time = predict_time(run, layout(1, 4, 0), cluster);
  const TimeEstimate dp_time = predict_time(run, layout(4, 1, 0), cluster);
  EXPECT_GT(ep_time.step_s(), 0.0);
  Layout dp4_zero0 = layout(4, 1, 0), ep4_zero0 = layout(1, 4, 0);
  EXPECT_GT(predict_time(run, ep4_zero0, cluster).comm_total_s, 0.0);
  (void)dp4_zero0;
  // The same active FLOPs per token on every layout.
  EXPECT_DOUBLE_EQ(ep_time.model_flops, dp_time.model_flops);
}

}  // namespace
}  // namespace trident::planner
