// Cluster files (planner/cluster.h): the committed examples load; a wrong key, type or value
// is an error naming the file, the key and what is allowed; what calibrate writes reads back.
#include <gtest/gtest.h>

#include "planner/cluster.h"

namespace trident::planner {
namespace {

std::string error_of(const std::string& text) {
  auto c = parse_cluster(text, "bad.toml");
  return c.is_ok() ? "" : c.status().to_string();
}

TEST(Cluster, ExampleFilesLoad) {
  for (const char* f : {"dgx-a100-80gb.toml", "dgx-a100-40gb.toml", "dgx-h100-80gb.toml"}) {
    auto c = load_cluster(std::string(TRIDENT_SOURCE_DIR "/configs/clusters/") + f);
    ASSERT_TRUE(c.is_ok()) << f << ": " << c.status().to_string();
    EXPECT_EQ(c.value().shape.devices_per_node, 8);
    EXPECT_GT(c.value().intra.bandwidth_gbs, c.value().inter.bandwidth_gbs) << f;
    // Tensor parallelism inside a node talks over NVLink; data parallelism across nodes over IB.
    const Cluster& k = c.value();
    EXPECT_EQ(&k.link_for(8, 16), static_cast<const LinkSpec*>(&k.intra));
    EXPECT_EQ(&k.link_for(4, 64), static_cast<const LinkSpec*>(&k.intra));
    EXPECT_EQ(&k.link_for(16, 16), static_cast<const LinkSpec*>(&k.inter));
    // Groups of 6 on one node stay in it; on 8-device nodes, ranks 6-11 straddle two.
    EXPECT_EQ(&k.link_for(6, 6), static_cast<const LinkSpec*>(&k.intra));
    EXPECT_TRUE(k.crosses_nodes(6, 48));
    EXPECT_EQ(&k.link_for(6, 48), static_cast<const LinkSpec*>(&k.inter));
    EXPECT_FALSE(k.crosses_nodes(2, 48));
  }
}

TEST(Cluster, BadFilesNameTheKeyAndWhatIsAllowed) {
  EXPECT_NE(error_of("[device]\nmemory_gb = 80\n").find("memory_gib"), std::string::npos);
  EXPECT_NE(error_of("[cluster]\nnodes = 0\n").find("nodes"), std::string::npos);
  EXPECT_NE(error_of("[device]\ngemm_efficiency = 1.5\n").find("gemm_efficiency"), std::string::npos);
  EXPECT_NE(error_of("[intra_node]\nbandwidth_gbs = \"fast\"\n").find("bandwidth_gbs"), std::string::npos);
  EXPECT_NE(error_of("[gpu]\nmemory_gib = 80\n").find("gpu"), std::string::npos);
  EXPECT_NE(error_of("[device\n").find("bad.toml"), std::string::npos);
  EXPECT_EQ(error_of("[cluster]\nnodes = 2\n"), "");
}

// Note [Unfused attention]: an unfused kernel's scores cost the same per score whatever the head
// size, 9 elements of the compute dtype per score at the memory's rate over the 7 T d FLOPs per
// head and token, at unfused_attention_efficiency (attention_efficiency's when 0); a fused one
// keeps its own figures.
TEST(Cluster, UnfusedAttentionPaysItsScoresThroughMemory) {
  auto a100 = load_cluster(TRIDENT_SOURCE_DIR "/configs/clusters/dgx-a100-80gb.toml");
  ASSERT_TRUE(a100.is_ok()) << a100.status().to_string();
  const Cluster& c = a100.value();
  const double gemm = c.gemm_flops(DType::kF16, 1e18);
  EXPECT_DOUBLE_EQ(c.attention_flops(DType::kF16, 128.0), gemm * 0.625 * 128.0 / 160.0);
  const double bw = c.device.memory_bandwidth_gbs * 1e9;
  for (double d : {64.0, 96.0, 128.0}) {
    // Seconds per head and token at T = 1: 7 d FLOPs at the score GEMMs' rate, then 18 bytes.
    const double seconds = 7.0 * d / c.attention_flops(DType::kF16, d, true);
    EXPECT_NEAR(seconds, 7.0 * d / (0.48 * gemm) + 18.0 / bw, 1e-12 * seconds) << d;
  }
  // In fp32 the scores are twice the bytes.
  const double f32 = 7.0 * 128.0 / c.attention_flops(DType::kF32, 128.0, true);
  EXPECT_NEAR(f32, 7.0 * 128.0 / (0.48 * c.gemm_flops(DType::kF32, 1e18)) + 36.0 / bw, 1e-12 * f32);
  Cluster plain = c;
  plain.device.unfused_attention_efficiency = 0.0;
  const double s = 7.0 * 128.0 / plain.attention_flops(DType::kF16, 128.0, true);
  EXPECT_NEAR(s, 7.0 * 128.0 / (0.625 * gemm) + 18.0 / bw, 1e-12 * s);
  EXPECT_NE(error_of("[device]\nunfused_attention_efficiency = -1\n").find("unfused_attention_efficiency"),
            std::string::npos);
}

TEST(Cluster, WrittenFilesReadBack) {
  Cluster c = local_cluster(2);
  c.device.peak_tflops_fp32 = 0.123;
  c.intra.latency_us = 17.5;
  auto back = parse_cluster(c.to_toml(), "written");
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_DOUBLE_EQ(back.value().device.peak_tflops_fp32, 0.123);
  EXPECT_DOUBLE_EQ(back.value().intra.latency_us, 17.5);
  EXPECT_EQ(back.value().shape.devices_per_node, 2);
}

}  // namespace
}  // namespace trident::planner
