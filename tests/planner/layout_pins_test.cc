// Pinned layouts (planner/layout_pins.h, Note [Pinned layouts]): --layout's words round-trip
// every layout the table prints (ZeRO-Offload's and the NVMe tier's included); each pinned axis holds in every layout the plan ranks; every
// layout the trainer accepts for a GPT-2 and a llama on 1 to 8 ranks, those the search prunes
// included, is the one layout of its pinned plan; a layout no rank count or trainer allows is
// named with the rule it breaks; a tensor-parallel group across nodes is priced and flagged
// as such; bad words are errors naming them.
#include <gtest/gtest.h>

#include "planner/layout_pins.h"
#include "planner/plan.h"
#include "support/planner_runs.h"
#include "support/tiny_model_configs.h"

namespace trident::planner {
namespace {

using testing::gpt_run;

// A llama of 4 layers, 4 heads sharing 2 kv heads, as the planner sees it.
RunSpec llama_run(int64_t G) {
  RunSpec run = gpt_run(4, 64, 4, 32, G);
  run.model = models::testing::tiny_llama(false);
  run.model.n_layer = 4;
  run.model.n_embd = 64;
  run.model.block_size = 32;
  run.shapes = models::model_family("llama").shapes(run.model);
  return run;
}

LayoutPins pins_of(const std::string& text) {
  auto p = parse_layout_pins(text);
  EXPECT_TRUE(p.is_ok()) << p.status().to_string();
  return p.is_ok() ? p.value() : LayoutPins{};
}

Plan pinned_plan(const RunSpec& run, int64_t ranks, const LayoutPins& pins) {
  SearchSpace space;
  space.ranks = ranks;
  space.pins = pins;
  Cluster c = local_cluster(ranks);
  c.shape.disk_read_gbs = c.shape.disk_write_gbs = 1.0;  // for the NVMe tier's layouts
  return make_plan(run, c, space, ranks > 1);
}

TEST(LayoutPins, EveryAcceptedLayoutIsItsPinnedPlansOnlyLayout) {
  for (const RunSpec& run : {gpt_run(4, 64, 4, 32, 8), llama_run(8)})
    for (int64_t ranks = 1; ranks <= 8; ++ranks) {
      // Every layout the trainer accepts: the search's space with offload (in host memory and on
      // the NVMe tier) and without its pruning.
      SearchSpace all;
      all.ranks = ranks;
      all.offload = true;
      all.nvme = true;
      all.pins.offload = false;  // a pinned axis lifts prunes(): pin it both ways
      std::vector<Layout> layouts = enumerate_layouts(run, all);
      all.pins.offload = true;
      for (const Layout& l : enumerate_layouts(run, all)) layouts.push_back(l);
      SCOPED_TRACE(run.model.arch + " on " + std::to_string(ranks) + " ranks");
      if (ranks <= 4 || ranks == 8) {
        ASSERT_FALSE(layouts.empty());
      }
      for (const Layout& l : layouts) {
        const LayoutPins pins = pins_of(l.str());
        EXPECT_TRUE(pins.admits(l)) << l.str();
        EXPECT_EQ(pins.ranks(), ranks) << l.str();
        const Plan plan = pinned_plan(run, ranks, pins);
        ASSERT_EQ(plan.ranked.size(), 1u) << l.str();
        EXPECT_EQ(plan.ranked[0].layout, l) << plan.ranked[0].layout.str() << " for " << l.str();
      }
    }
}

TEST(LayoutPins, EachPinnedAxisHoldsInEveryRankedLayout) {
  const RunSpec run = gpt_run(4, 64, 4, 32, 8);
  const std::vector<std::string> words = {"dp2",   "tp2",  "tp2+sp",         "pp2",       "pp2x2", "zero1",
                                          "zero2", "zero0", "ckpt=selective", "ckpt=full", "b2",    "m4"};
  for (const std::string& word : words) {
    SCOPED_TRACE(word);
    const LayoutPins pins = pins_of(word);
    const Plan plan = pinned_plan(run, 4, pins);
    ASSERT_FALSE(plan.ranked.empty());
    for (const Candidate& c : plan.ranked) EXPECT_TRUE(pins.admits(c.layout)) << c.layout.str();
    EXPECT_NE(plan_table(plan, 3).find("pinned: " + pins.str()), std::string::npos);
    EXPECT_EQ(plan_json(plan, 3)["pinned"], pins.str());
  }
  // Unpinned, the search covers more than any one pin leaves.
  EXPECT_GT(pinned_plan(run, 4, {}).ranked.size(), pinned_plan(run, 4, pins_of("tp2")).ranked.size());
}

TEST(LayoutPins, PinsLiftTheSearchsPruningButNotTheTrainersCheck) {
  const RunSpec run = gpt_run(4, 64, 4, 32, 8);
  // ZeRO on one rank and 2 micro-batches on 4 stages: left out unpinned, evaluated pinned.
  for (const std::string text : {"dp1 tp1 pp1 zero1 ckpt=none b8 m1", "dp1 tp1 pp4 zero0 ckpt=full b4 m2"}) {
    const LayoutPins pins = pins_of(text);
    SearchSpace unpinned;
    unpinned.ranks = pins.ranks();
    for (const Layout& l : enumerate_layouts(run, unpinned)) EXPECT_FALSE(pins.admits(l)) << l.str();
    const Plan plan = pinned_plan(run, pins.ranks(), pins);
    ASSERT_EQ(plan.ranked.size(), 1u) << text;
    EXPECT_TRUE(pins.admits(plan.ranked[0].layout));
  }
  // Rules no pin lifts, each named.
  auto reason = [&](const std::string& text, int64_t ranks) {
    return no_layout_reason(pinned_plan(run, ranks, pins_of(text)));
  };
  EXPECT_NE(reason("tp3", 3).find("model.n_head (4) must be divisible by parallel.tp (3)"), std::string::npos)
      << reason("tp3", 3);
  EXPECT_NE(reason("dp3 tp2", 4).find("dp x tp x pp = 6, not the 4 ranks"), std::string::npos);
  EXPECT_NE(reason("tp4", 2).find("tp x pp = 4 does not divide the 2 ranks"), std::string::npos);
  EXPECT_NE(reason("dp3", 3).find("dp 3 does not divide the 8 sequences"), std::string::npos);
  EXPECT_NE(reason("dp2 b2 m3", 2).find("b x m x dp = 12, not the 8 sequences"), std::string::npos);
  EXPECT_NE(reason("dp1 pp2x2 b8 m1", 2).find("divisible by pp 2"), std::string::npos);
}

// tp 6 on 8-device nodes: on one node its groups stay inside; on 6 nodes ranks 6-11 straddle
// two, so its all-reduces run at the network's rate and the table says so.
TEST(LayoutPins, ATensorParallelGroupAcrossNodesIsPricedAndFlagged) {
  const RunSpec run = gpt_run(24, 2304, 24, 2048, 48, DType::kBF16);
  auto c = load_cluster(TRIDENT_SOURCE_DIR "/configs/clusters/dgx-a100-80gb.toml");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  Cluster nodes = c.value();
  nodes.shape.nodes = 6;
  Cluster flat = nodes;  // the same, but the network as fast as NVLink
  static_cast<LinkSpec&>(flat.inter) = nodes.intra;
  SearchSpace space;
  space.ranks = 48;
  space.pins = pins_of("dp8 tp6 pp1 zero1 ckpt=full b1 m6");
  const Plan across = make_plan(run, nodes, space, true);
  ASSERT_EQ(across.ranked.size(), 1u);
  const Candidate& tp6 = across.ranked[0];
  EXPECT_TRUE(tp6.tp_crosses_nodes);
  EXPECT_GT(tp6.time.exposed_comm_s, make_plan(run, flat, space, true).ranked[0].time.exposed_comm_s);
  EXPECT_NE(plan_table(across, 1).find("(tp across nodes)"), std::string::npos);
  EXPECT_TRUE(plan_json(across, 1)["ranked"][0]["tp_crosses_nodes"].get<bool>());
  space.pins = pins_of("dp12 tp4 pp1 zero1 ckpt=full b1 m4");
  EXPECT_FALSE(make_plan(run, nodes, space, true).ranked.at(0).tp_crosses_nodes);
  space.ranks = 6;
  space.pins = pins_of("dp1 tp6 pp1 zero0 ckpt=full b1 m48");
  EXPECT_FALSE(make_plan(run, nodes, space, false).ranked.at(0).tp_crosses_nodes);
}

TEST(LayoutPins, BadWordsAreNamed) {
  auto error = [](const std::string& text) {
    auto p = parse_layout_pins(text);
    return p.is_ok() ? std::string("(parsed)") : p.status().to_string();
  };
  EXPECT_NE(error("dp2 qq").find("'qq' is not a layout word"), std::string::npos);
  EXPECT_NE(error("tp0").find("'tp0' needs a whole number >= 1"), std::string::npos);
  EXPECT_NE(error("tp2 tp4").find("'tp4' repeats an axis"), std::string::npos);
  EXPECT_NE(error("zero4").find("'zero4' names no ZeRO stage"), std::string::npos);
  EXPECT_NE(error("ckpt=some").find("'ckpt=some' is not a checkpointing mode"), std::string::npos);
  EXPECT_NE(error("pp2x").find("'pp2x' needs a whole number"), std::string::npos);
  EXPECT_NE(error("  ").find("names no axis"), std::string::npos);
  EXPECT_EQ(error("b2"), "(parsed)");
  // Words as the table writes them, in any order.
  const LayoutPins p = pins_of("m8 zero1+offload ckpt=full pp2x3 tp4+sp dp2 b1");
  EXPECT_EQ(p.str(), "dp2 tp4 sequence_parallel=on pp2 virtual_stages=3 zero1 offload=cpu ckpt=full b1 m8");
  EXPECT_EQ(p.ranks(), 16);
}

}  // namespace
}  // namespace trident::planner
