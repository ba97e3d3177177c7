// A mixture's routing as a run measured it (Note [Measured expert load] in
// planner/expert_load.h): the busiest ep rank's rows over the mean, from metrics.jsonl's
// per-expert counts; a bad file is an error naming its line and what is wrong; the time model
// waits for the busiest rank's experts and exchanges under expert parallelism only.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "models/registry.h"
#include "planner/cluster.h"
#include "planner/expert_load.h"
#include "planner/time_model.h"
#include "support/planner_runs.h"

namespace trident::planner {
namespace {

RunSpec tiny_moe() { return testing::tiny_moe_run(); }

std::string write(const std::filesystem::path& dir, const std::string& text) {
  const std::filesystem::path file = dir / "metrics.jsonl";
  std::ofstream(file) << text;
  return file.string();
}

TEST(ExpertLoad, TheBusiestRanksRowsOverTheMeanAveragedOverSteps) {
  ExpertLoad load;
  load.layers[0] = {{3, 1, 2, 2}, {2, 2, 2, 2}};
  // ep 2 holds experts {0, 1} and {2, 3}: 4 and 4 rows, then 4 and 4.
  EXPECT_DOUBLE_EQ(load.imbalance(0, 2), 1.0);
  // ep 4: one expert each, the busiest 3 of a mean of 2, then balanced.
  EXPECT_DOUBLE_EQ(load.imbalance(0, 4), (1.5 + 1.0) / 2.0);
  EXPECT_DOUBLE_EQ(load.imbalance(0, 1), 1.0);
  EXPECT_DOUBLE_EQ(load.imbalance(1, 4), 1.0) << "a layer without counts is balanced";
  load.layers[1] = {{6, 2, 0, 0}};
  EXPECT_DOUBLE_EQ(load.imbalance(1, 2), 2.0);
}

TEST(ExpertLoad, ReadsAMetricsFileAndNamesWhatIsWrongInIt) {
  const RunSpec run = tiny_moe();
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("trident_expert_load_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string good = write(dir,
                                 "{\"step\": 1, \"loss\": 10.8}\n"
                                 "{\"step\": 2, \"moe_layers\": [{\"layer\": 0, \"tokens\": [1, 2, 3, 4]}, "
                                 "{\"layer\": 3, \"tokens\": [4, 4, 0, 0]}]}\n\n");
  auto load = read_expert_load(good, run.shapes);
  ASSERT_TRUE(load.is_ok()) << load.status().to_string();
  EXPECT_EQ(load.value().layers.size(), 2u);
  EXPECT_DOUBLE_EQ(load.value().imbalance(3, 2), 2.0);
  EXPECT_DOUBLE_EQ(load.value().imbalance(0, 2), 7.0 / 5.0);
  const std::pair<std::string, std::string> bad[] = {
      {"{\"step\": 1}\nnot json\n", "line 2: not a JSON object"},
      {"{\"moe_layers\": [{\"layer\": 7, \"tokens\": [1, 2, 3, 4]}]}\n", "layer 7 is not a mixture-of-experts layer"},
      {"{\"moe_layers\": [{\"layer\": 0, \"tokens\": [1, 2]}]}\n", "layer 0 counts 2 experts, the planned model has 4"},
      {"{\"moe_layers\": [{\"layer\": 0, \"tokens\": [1, -2, 3, 4]}]}\n", "must be counts >= 0"},
      {"{\"moe_layers\": [{\"tokens\": [1, 2, 3, 4]}]}\n", "needs an integer \"layer\""},
      {"{\"step\": 1, \"loss\": 3.0}\n", "no line has \"moe_layers\""},
      {"{\"step\": 1, \"mo\n{\"moe_layers\": [{\"layer\": 0, \"tokens\": [1, 2, 3, 4]}]}\n", "line 1: not a JSON object"},
  };
  for (const auto& [text, message] : bad) {
    const std::string file = write(dir, text);
    auto r = read_expert_load(file, run.shapes);
    ASSERT_FALSE(r.is_ok()) << text;
    EXPECT_NE(r.status().message().find(message), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(file), std::string::npos) << r.status().message();
  }
  EXPECT_FALSE(read_expert_load((dir / "none.jsonl").string(), run.shapes).is_ok());
  // A last line cut short (a run stopped while writing it) is left out; the rest is read.
  const std::string cut = write(dir, "{\"moe_layers\": [{\"layer\": 0, \"tokens\": [4, 4, 0, 0]}]}\n"
                                     "{\"step\": 2, \"moe_layers\": [{\"layer\": 0, \"tok\n\n");
  auto partial = read_expert_load(cut, run.shapes);
  ASSERT_TRUE(partial.is_ok()) << partial.status().to_string();
  EXPECT_DOUBLE_EQ(partial.value().imbalance(0, 2), 2.0);
  std::filesystem::remove_all(dir);
}

// Under ep the experts' products and their exchanges take the busiest rank's imbalance x the
// balanced time; at ep = 1 every rank runs every expert and the counts change nothing.
TEST(ExpertLoad, TheStepWaitsForTheBusiestRanksExpertsUnderExpertParallelism) {
  RunSpec run = tiny_moe();
  Cluster c = local_cluster(2);
  c.intra.latency_us = c.inter.latency_us = 0.0;  // the rows' bytes scale, not the messages' latency
  Layout ep;
  ep.ep = 2;
  ep.micro_batch = 4;
  ep.accum = 1;
  Layout one;
  one.dp = 2;
  one.micro_batch = 4;
  one.accum = 1;
  const TimeEstimate balanced = predict_time(run, ep, c), balanced_dp = predict_time(run, one, c);
  for (int64_t layer : run.shapes.sparse_layers) run.expert_load.layers[layer] = {{5, 0, 3, 0}};  // 5 of a mean of 4
  for (const char* ckpt : {"none", "full"}) {
    SCOPED_TRACE(ckpt);
    ep.checkpointing = ckpt;
    RunSpec balanced_run = run;
    balanced_run.expert_load = {};
    const TimeEstimate even = predict_time(balanced_run, ep, c), skewed = predict_time(run, ep, c);
    EXPECT_NEAR(skewed.parts.experts, 1.25 * even.parts.experts, 1e-12);
    EXPECT_NEAR(skewed.ep_s, 1.25 * even.ep_s, 1e-12);
    EXPECT_NEAR(skewed.parts.recompute - even.parts.recompute,
                std::string(ckpt) == "full" ? 0.25 * skewed.parts.experts / 1.25 / 3.0 : 0.0,
                1e-3 * even.parts.experts);
    EXPECT_NEAR(skewed.parts.total(), skewed.compute_s, 1e-12 * skewed.compute_s);
  }
  EXPECT_GT(balanced.step_s(), 0.0);
  EXPECT_EQ(predict_time(run, one, c).step_s(), balanced_dp.step_s());
  // A capacity drops what is past factor x an expert's share: the busiest rank runs no more.
  ep.checkpointing = "none";
  run.shapes.capacity_factor = 1.1;
  RunSpec balanced_run = run;
  balanced_run.expert_load = {};
  EXPECT_NEAR(predict_time(run, ep, c).parts.experts, 1.1 * predict_time(balanced_run, ep, c).parts.experts, 1e-12);
}

}  // namespace
}  // namespace trident::planner
