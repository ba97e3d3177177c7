// GEMM rates (src/kernels/cpu/gemm_rates.h): the step's shape list and the measurement's
// bookkeeping. Rates are timings, so nothing here checks one beyond being positive and
// finite, and the weighted rate lying between the slowest and the fastest shape.
#include "kernels/cpu/gemm_rates.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "kernels/cpu/onednn_gemm.h"

namespace trident::kernels::cpu {
namespace {

double step_flops(const std::vector<GemmShape>& shapes) {
  double total = 0.0;
  for (const GemmShape& s : shapes) total += s.flops() * static_cast<double>(s.count);
  return total;
}

TEST(GemmRates, TheStepsShapesCountSixFlopsPerWeightPerToken) {
  for (const auto& [L, C, V, B, T] : {std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>{12, 768, 50257, 4, 1024},
                                      {4, 256, 50257, 8, 256}, {1, 8, 3, 1, 1}}) {
    const std::vector<GemmShape> shapes = transformer_gemm_shapes(L, C, V, B, T);
    EXPECT_EQ(shapes.size(), 15u);
    // The linears' weights: c_attn 3C^2, attn.c_proj C^2, mlp.c_fc 4C^2, mlp.c_proj 4C^2 per
    // block, and the LM head V C.
    const double weights = static_cast<double>(L) * 12.0 * C * C + static_cast<double>(V) * C;
    EXPECT_EQ(step_flops(shapes), 6.0 * B * T * weights) << "L=" << L << " C=" << C;
  }
  const std::vector<GemmShape> s = transformer_gemm_shapes(12, 768, 50257, 4, 1024);
  EXPECT_EQ(s[0].name, "c_attn forward");
  EXPECT_EQ(s[0].M, 4096);
  EXPECT_EQ(s[0].N, 2304);
  EXPECT_EQ(s[0].K, 768);
  EXPECT_EQ(s[0].count, 12);
  EXPECT_EQ(s.back().name, "lm_head dW");
  EXPECT_EQ(s.back().M, 50257);
  EXPECT_EQ(s.back().K, 4096);
  EXPECT_EQ(s.back().count, 1);
  EXPECT_TRUE(s.back().trans_a);
  EXPECT_EQ(transformer_gemm_shapes(0, 8, 3, 1, 1).size(), 3u);  // the head alone
}

TEST(GemmRates, EveryEngineIsMeasuredAndTheWeightedRateLiesBetweenItsShapes) {
  const std::vector<GemmShape> shapes = transformer_gemm_shapes(1, 64, 300, 2, 48);
  GemmRateOptions fast;
  fast.seconds_per_shape = 0.0;  // a warm-up and one timed call per shape
  const GemmEngines before = gemm_engines();
  const GemmRates rates = measure_gemm_rates(shapes, {GemmType::kF32, GemmType::kBF16}, fast);
  EXPECT_EQ(gemm_engines(), before) << "measuring changed the process's engines";
  EXPECT_EQ(rates.shapes.size(), shapes.size());
  EXPECT_GT(rates.threads, 0);
  EXPECT_GT(rates.seconds, 0.0);
  std::set<std::string> expected;
  for (const GemmType t : {GemmType::kF32, GemmType::kBF16})
    for (const std::string& e : gemm_rate_engines(t)) expected.insert(e);
  EXPECT_EQ(expected.count("onednn-bf16"), onednn_has_native_bf16() ? 1u : 0u);
  std::set<std::string> got;
  for (const GemmRate& r : rates.rates) {
    got.insert(r.engine);
    ASSERT_EQ(r.shape_gflops.size(), shapes.size()) << r.engine;
    for (const double g : r.shape_gflops) EXPECT_TRUE(std::isfinite(g) && g > 0.0) << r.engine << ": " << g;
    EXPECT_TRUE(std::isfinite(r.gflops) && r.gflops > 0.0) << r.engine;
    EXPECT_LE(r.min_gflops, r.gflops * (1 + 1e-12)) << r.engine;
    EXPECT_GE(r.max_gflops, r.gflops * (1 - 1e-12)) << r.engine;
    EXPECT_EQ(r.threaded, r.engine.ends_with("-threaded")) << r.engine;
  }
  EXPECT_EQ(got, expected);
  for (const GemmType t : {GemmType::kF32, GemmType::kBF16}) {
    double best = 0.0;
    for (const GemmRate& r : rates.rates)
      if (r.dtype == t) best = std::max(best, r.gflops);
    EXPECT_EQ(rates.ceiling_gflops(t), best);
    ASSERT_NE(rates.fastest(t, /*trident_only=*/true), nullptr);
    EXPECT_FALSE(rates.fastest(t, true)->threaded);
  }
  // One dtype only: the other's ceiling is 0.
  const GemmRates f32 = measure_gemm_rates({shapes[0]}, {GemmType::kF32}, fast);
  EXPECT_EQ(f32.ceiling_gflops(GemmType::kBF16), 0.0);
  EXPECT_EQ(f32.fastest(GemmType::kBF16), nullptr);
  EXPECT_EQ(f32.rates.size(), gemm_rate_engines(GemmType::kF32).size());
}

}  // namespace
}  // namespace trident::kernels::cpu
