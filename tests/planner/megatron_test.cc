// The planner at scale, against published numbers: Megatron-LM's Table 1 (Narayanan et al., SC
// 2021; tests/planner/megatron_sc21_table1.csv) predicted with the DGX A100 cluster file
// (configs/clusters/dgx-a100-80gb.toml). For each row, the paper's tensor x pipeline x data
// sizes with full recomputation (the planner choosing the micro-batch and virtual stages the
// table does not give) must fit in 80 GB and predict a per-GPU throughput within 20% of the
// paper's, and the median error within 10% (issue #53 aims at 15% per source); and the
// planner's own best layout over the whole space must be at least as fast. Attention is priced
// as that Megatron ran it (unfused: its scores through memory, a cost per score; Note [Unfused
// attention] in planner/cluster.cc), and data parallelism's all-reduce across nodes hierarchically, every card of a node
// carrying a share (Note [Collectives across nodes]): priced at one card per GPU before, the
// 1.7B row's dp 32 took 0.53 s where NCCL moves it in under 0.1 s, which hid the attention's
// cost (1.7B +6.4% then, +23% with the right all-reduce and flash-like attention, +7.1% now).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "models/registry.h"
#include "planner/plan.h"

namespace trident::planner {
namespace {

struct Row {
  double params_b;
  int64_t heads, hidden, layers, tensor, pipeline, gpus, batch;
  double tflops;
};

std::vector<Row> read_rows() {
  std::ifstream in(TRIDENT_SOURCE_DIR "/tests/planner/megatron_sc21_table1.csv");
  EXPECT_TRUE(in.good()) << "cannot read megatron_sc21_table1.csv";
  std::vector<Row> rows;
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (header) {
      header = false;
      continue;
    }
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream s(line);
    Row r{};
    s >> r.params_b >> r.heads >> r.hidden >> r.layers >> r.tensor >> r.pipeline >> r.gpus >> r.batch >> r.tflops;
    rows.push_back(r);
  }
  return rows;
}

RunSpec spec_of(const Row& r) {
  RunSpec run;
  run.model.arch = "gpt2";
  run.model.n_layer = r.layers;
  run.model.n_head = r.heads;
  run.model.n_embd = r.hidden;
  run.model.block_size = 2048;
  run.model.vocab_size = 51200;
  run.shapes = models::model_family("gpt2").shapes(run.model);
  run.seq_len = 2048;
  run.global_batch = r.batch;
  run.compute = DType::kF16;
  run.convention = convention_named("megatron", DType::kF16, "none").value();  // fp16 gradients, no overlap
  run.convention.unfused_attention = true;  // SC'21's Megatron materialized the scores
  run.bucket_bytes = 25 << 20;
  run.on_device = true;
  return run;
}

// The paper's FLOPs per iteration (its equation 3: recomputation included).
double paper_flops(const Row& r) {
  const double B = static_cast<double>(r.batch), s = 2048, l = static_cast<double>(r.layers),
               h = static_cast<double>(r.hidden), V = 51200;
  return 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
}

TEST(Megatron, TableOneWithinTwentyPercentAndThePlannersBestIsAtLeastAsFast) {
  auto cluster = load_cluster(TRIDENT_SOURCE_DIR "/configs/clusters/dgx-a100-80gb.toml");
  ASSERT_TRUE(cluster.is_ok()) << cluster.status().to_string();
  const std::vector<Row> rows = read_rows();
  ASSERT_EQ(rows.size(), 10u);
  std::vector<double> errors;
  for (const Row& r : rows) {
    SCOPED_TRACE(std::to_string(r.params_b) + "B on " + std::to_string(r.gpus) + " GPUs");
    const RunSpec run = spec_of(r);
    EXPECT_NEAR(static_cast<double>(run.shapes.num_parameters()) / 1e9, r.params_b, 0.03 * r.params_b);
    SearchSpace space;
    space.ranks = r.gpus;
    space.max_tp = cluster.value().shape.devices_per_node;
    // The paper's layout: its t, p, d, full recomputation, no ZeRO or sequence parallelism.
    std::optional<Candidate> paper;
    for (const Layout& l : enumerate_layouts(run, space)) {
      if (l.tp != r.tensor || l.pp != r.pipeline || l.zero_stage != 0 || l.sequence_parallel || l.checkpointing != "full")
        continue;
      const Candidate c = evaluate(run, l, cluster.value(), true);
      if (c.fits && (!paper || c.tokens_per_s > paper->tokens_per_s)) paper = c;
    }
    ASSERT_TRUE(paper.has_value()) << "no layout with the paper's sizes fits";
    const double predicted = paper_flops(r) / paper->time.step_s() / static_cast<double>(r.gpus) / 1e12;
    std::printf("%7.1fB t%lld p%lld d%lld: paper %5.0f TFLOP/s per GPU, predicted %5.1f (%+5.1f%%) as %s\n", r.params_b,
                static_cast<long long>(r.tensor), static_cast<long long>(r.pipeline),
                static_cast<long long>(r.gpus / (r.tensor * r.pipeline)), r.tflops, predicted,
                100.0 * (predicted / r.tflops - 1.0), paper->layout.str().c_str());
    EXPECT_NEAR(predicted, r.tflops, 0.2 * r.tflops);
    errors.push_back(std::abs(predicted / r.tflops - 1.0));
    const Plan plan = make_plan(run, cluster.value(), space, true);
    ASSERT_FALSE(plan.ranked.empty());
    ASSERT_TRUE(plan.ranked.front().fits);
    std::printf("          planner's best: %s, %.1f TFLOP/s per GPU (%s, %lld of %lld layouts, %.2f s)\n",
                plan.ranked.front().layout.str().c_str(),
                paper_flops(r) / plan.ranked.front().time.step_s() / static_cast<double>(r.gpus) / 1e12,
                plan.search.exhaustive ? "exhaustive" : "annealing", static_cast<long long>(plan.search.evaluated),
                static_cast<long long>(plan.layouts), plan.seconds);
    EXPECT_GE(plan.ranked.front().tokens_per_s, paper->tokens_per_s * (1.0 - 1e-9));
  }
  std::sort(errors.begin(), errors.end());
  const double median = 0.5 * (errors[errors.size() / 2 - 1] + errors[errors.size() / 2]);
  std::printf("median |error| %.1f%%\n", 100.0 * median);
  EXPECT_LT(median, 0.10);
}

}  // namespace
}  // namespace trident::planner
