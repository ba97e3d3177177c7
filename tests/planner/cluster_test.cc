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
  for (const char* f : {"dgx-a100-80gb.toml", "dgx-h100-80gb.toml"}) {
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
