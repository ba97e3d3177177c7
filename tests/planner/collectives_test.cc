// Collectives priced by the links they cross (planner/collectives.h): a ring inside a node,
// hierarchical across nodes with each device's share of its node's cards, one ring at the
// network's rate for groups that sit unevenly on the nodes.
#include <gtest/gtest.h>

#include "planner/collectives.h"
#include "planner/plan.h"
#include "planner/time_model.h"
#include "support/planner_runs.h"

namespace trident::planner {
namespace {

Cluster dgx(int64_t nodes) { return testing::shipped_cluster("dgx-h100-80gb.toml", nodes); }

TEST(Collectives, RingAlphaBeta) {
  LinkSpec link;
  link.bandwidth_gbs = 10.0;
  link.latency_us = 5.0;
  EXPECT_EQ(all_reduce_seconds(1e9, 1, link), 0.0);
  // Ring all-reduce: 2 (n-1)/n of the bytes over the link, 2 (n-1) latencies.
  EXPECT_NEAR(all_reduce_seconds(1e9, 4, link), 2.0 * 3.0 / 4.0 * 0.1 + 6 * 5e-6, 1e-12);
  EXPECT_NEAR(reduce_scatter_seconds(1e9, 4, link), 3.0 / 4.0 * 0.1 + 3 * 5e-6, 1e-12);
}

TEST(Collectives, GroupsSitOnTheNodesAsTheMeshPlacesThem) {
  const Cluster k = dgx(16);  // 8 devices a node
  // dp 128 of stride 1 (tp 1): 8 a node over 16 nodes.
  GroupPlacement p = place_group({128, 1}, 128, k);
  EXPECT_EQ(p.per_node, 8);
  EXPECT_EQ(p.nodes, 16);
  EXPECT_FALSE(p.uneven);
  // tp 2: dp groups of 64 ranks 2 apart, 4 a node.
  p = place_group({64, 2}, 128, k);
  EXPECT_EQ(p.per_node, 4);
  EXPECT_EQ(p.nodes, 16);
  // tp 8: one member a node.
  p = place_group({16, 8}, 128, k);
  EXPECT_EQ(p.per_node, 1);
  EXPECT_EQ(p.nodes, 16);
  // Inside one node.
  p = place_group({8, 1}, 128, k);
  EXPECT_EQ(p.nodes, 1);
  EXPECT_EQ(p.per_node, 8);
  // tp 6 on 8-device nodes straddles; dp groups 6 apart land unevenly.
  EXPECT_TRUE(place_group({6, 1}, 48, k).uneven);
  EXPECT_TRUE(place_group({8, 6}, 48, k).uneven);
}

TEST(Collectives, AcrossNodesEveryCardOfTheNodeCarriesAShare) {
  const Cluster k = dgx(16);
  const double B = 1e9;
  const double intra = k.intra.bandwidth_gbs * 1e9, inter = k.inter.bandwidth_gbs * 1e9;
  const double a_intra = k.intra.latency_us * 1e-6, a_inter = k.inter.latency_us * 1e-6;
  // 8 a node over 16 nodes: the node's ring, then a 16-node ring of B / 8 on each card.
  const double expected = 2.0 * (7.0 / 8.0 * B / intra + 7.0 * a_intra) +
                          2.0 * (15.0 / 16.0 * B / 8.0 / inter + 15.0 * a_inter);
  EXPECT_NEAR(collective_seconds(Collective::kAllReduce, B, {128, 1}, 128, k), expected, 1e-12);
  EXPECT_NEAR(collective_seconds(Collective::kReduceScatter, B, {128, 1}, 128, k), expected / 2.0, 1e-12);
  // Faster than one ring at one card's rate: the nodes' other cards carry the rest.
  const double flat = all_reduce_seconds(B, 128, k.inter);
  EXPECT_GT(flat / expected, 4.0);  // not 8x: the node's own ring and the latencies
  // One member a node: a ring across the nodes on each member's card.
  EXPECT_NEAR(collective_seconds(Collective::kAllReduce, B, {16, 8}, 128, k), all_reduce_seconds(B, 16, k.inter), 1e-12);
  // Inside a node: NVLink's ring.
  EXPECT_NEAR(collective_seconds(Collective::kAllReduce, B, {8, 1}, 128, k), all_reduce_seconds(B, 8, k.intra), 1e-12);
  // Uneven: one ring at the network's rate.
  EXPECT_NEAR(collective_seconds(Collective::kAllReduce, B, {6, 1}, 48, k), all_reduce_seconds(B, 6, k.inter), 1e-12);
  // One rank: nothing.
  EXPECT_EQ(collective_seconds(Collective::kAllReduce, B, {1, 1}, 128, k), 0.0);
}

// The planner's data-parallel time over nodes follows: dp 16 across two nodes costs far less
// than twice dp 8 inside one would at the network's rate, and bf16 gradient communication
// halves the bytes.
TEST(Collectives, DataParallelAcrossNodesAndBf16Gradients) {
  RunSpec run = testing::gpt_run(8, 2048, 16, 2048, 16, DType::kBF16);
  run.place_on_device();
  const Cluster k = dgx(2);
  Layout l;
  l.dp = 16;
  l.micro_batch = 1;
  l.accum = 1;
  const TimeEstimate fp32 = predict_time(run, l, k);
  const double P = static_cast<double>(run.shapes.num_parameters());
  const double expected = collective_seconds(Collective::kAllReduce, 4.0 * P, {16, 1}, 16, k);
  EXPECT_NEAR(fp32.comm_total_s, expected, 1e-9 * expected);
  EXPECT_LT(fp32.comm_total_s, 0.5 * all_reduce_seconds(4.0 * P, 16, k.inter));
  run.convention.grad_comm_bytes = 2.0;
  const TimeEstimate bf16 = predict_time(run, l, k);
  EXPECT_NEAR(bf16.comm_total_s, collective_seconds(Collective::kAllReduce, 2.0 * P, {16, 1}, 16, k), 1e-9 * expected);
}

// Note [Collectives as measured]: a link's factors scale its reduce-scatters and all-gathers,
// not its all-reduces (what its rate was fitted to), inside a node and across.
TEST(Collectives, EachCollectiveRunsAtItsMeasuredFactor) {
  Cluster c;
  c.shape.nodes = 2;
  c.shape.devices_per_node = 4;
  const MeshGroup g{8, 1};
  const double B = 1e9;
  const double ar = collective_seconds(Collective::kAllReduce, B, g, 8, c);
  const double rs = collective_seconds(Collective::kReduceScatter, B, g, 8, c);
  EXPECT_NEAR(rs, ar / 2.0, 1e-12);
  EXPECT_NEAR(collective_seconds(Collective::kAllGather, B, g, 8, c), rs, 1e-12);
  c.intra.reduce_scatter_factor = c.inter.reduce_scatter_factor = 2.5;
  c.intra.all_gather_factor = c.inter.all_gather_factor = 0.4;
  EXPECT_NEAR(collective_seconds(Collective::kAllReduce, B, g, 8, c), ar, 1e-12);
  EXPECT_NEAR(collective_seconds(Collective::kReduceScatter, B, g, 8, c), 2.5 * rs, 1e-12);
  EXPECT_NEAR(collective_seconds(Collective::kAllGather, B, g, 8, c), 0.4 * rs, 1e-12);
}

}  // namespace
}  // namespace trident::planner
