// A block's products by their shapes (planner/gemm_time.h): which products tensor parallelism
// splits along their inputs, and each GEMM at the rate of its reduction length.
#include <gtest/gtest.h>

#include "models/registry.h"
#include "planner/gemm_time.h"
#include "support/planner_runs.h"

namespace trident::planner {
namespace {

TEST(GemmTime, RowParallelProductsAreTheFamiliesSplitsAlongTheirInputs) {
  const RunSpec gpt = testing::gpt_run(2, 256, 4, 64, 1);
  const int64_t C = 256;
  EXPECT_FALSE(row_parallel(gpt.shapes, C, 3 * C));  // c_attn: column
  EXPECT_FALSE(row_parallel(gpt.shapes, C, 4 * C));  // c_fc: column
  EXPECT_TRUE(row_parallel(gpt.shapes, 4 * C, C));   // mlp.c_proj: row
  models::ModelConfig m;
  m.arch = "llama";
  m.n_layer = 2;
  m.n_head = 8;
  m.n_embd = 256;
  m.vocab_size = 512;
  m.block_size = 64;
  const models::ModelShapes s = models::model_family("llama").shapes(m);
  // gate and up (C -> I) column, down (I -> C) row, as the family's tp plan splits them.
  std::vector<std::pair<int64_t, int64_t>> mlp;
  for (const auto& p : s.block_matmuls)
    if (p.first != p.second && p.first == C && p.second > C) mlp.push_back(p);
  ASSERT_FALSE(mlp.empty());
  const int64_t I = mlp.front().second;
  EXPECT_FALSE(row_parallel(s, C, I));
  EXPECT_TRUE(row_parallel(s, I, C));
}

TEST(GemmTime, EachGemmRunsAtItsReductionLengthsRate) {
  const RunSpec run = testing::gpt_run(2, 256, 4, 64, 1);
  Cluster c = local_cluster(2);
  const double rows = 1e18;  // no rows fall-off
  const double rate = c.gemm_flops(DType::kF32, rows);
  // No fall-off: 2 in out per token forward, twice that backward, whatever tp.
  const std::vector<std::pair<int64_t, int64_t>> fc = {{256, 1024}}, proj = {{1024, 256}};
  ProductSeconds p = product_seconds(fc, run.shapes, 1, true, c, DType::kF32, rows);
  EXPECT_NEAR(p.forward, 2.0 * 256 * 1024 / rate, 1e-18);
  EXPECT_NEAR(p.backward, 2.0 * p.forward, 1e-18);
  c.device.gemm_half_k = 128.0;
  const double f = 2.0 * 256 * 1024;
  // tp 1: the forward's K is 256, the dx's 1024, dW's the rows.
  p = product_seconds(fc, run.shapes, 1, true, c, DType::kF32, rows);
  EXPECT_NEAR(p.forward, f * (1.0 + 128.0 / 256) / rate, 1e-15);
  EXPECT_NEAR(p.backward, f * (1.0 + 128.0 / 1024) / rate + f / rate, 1e-15);
  // tp 2, column-parallel c_fc: a half of the FLOPs, the dx's K halved.
  p = product_seconds(fc, run.shapes, 2, true, c, DType::kF32, rows);
  EXPECT_NEAR(p.forward, f / 2 * (1.0 + 128.0 / 256) / rate, 1e-15);
  EXPECT_NEAR(p.backward, f / 2 * (1.0 + 128.0 / 512) / rate + f / 2 / rate, 1e-15);
  // tp 2, row-parallel mlp.c_proj: the forward's K halved.
  p = product_seconds(proj, run.shapes, 2, true, c, DType::kF32, rows);
  EXPECT_NEAR(p.forward, f / 2 * (1.0 + 128.0 / 512) / rate, 1e-15);
  EXPECT_NEAR(p.backward, f / 2 * (1.0 + 128.0 / 256) / rate + f / 2 / rate, 1e-15);
  // Not split (a mixture's experts): whole on every rank.
  p = product_seconds(proj, run.shapes, 2, false, c, DType::kF32, rows);
  EXPECT_NEAR(p.forward, f * (1.0 + 128.0 / 1024) / rate, 1e-15);
}

}  // namespace
}  // namespace trident::planner
