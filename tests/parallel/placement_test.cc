// The placement table (parallel/placement.h): rows built from specs on a mesh, local shapes of
// even and uneven splits, tensor parallelism's boxes and local parts, pipeline stages,
// ZeRO's flat placements, frozen parameters, reduction groups. Rank-independent: it runs in
// mesh_test's binary on every rank.
#include <gtest/gtest.h>

#include "core/check.h"
#include "core/factory.h"
#include "core/views.h"
#include "models/causal_lm.h"
#include "parallel/placement.h"

namespace trident::parallel {
namespace {

std::vector<ParamSpec> specs() {
  return {
      {"wte.weight", Shape{10, 4}, models::CausalLM::kEmbedding, Placement::shard(0), true},
      {"h.0.attn.c_attn.weight", Shape{4, 12}, 0, Placement::shard(1, 3), true},
      {"h.0.attn.c_attn.bias", Shape{12}, 0, Placement::shard(0, 3), false},
      {"h.0.ln_1.weight", Shape{4}, 0, Placement::replicate(), true},
      {"h.1.mlp.c_proj.weight", Shape{7, 4}, 1, Placement::shard(0), true},
      {"ln_f.weight", Shape{4}, models::CausalLM::kHead, Placement::replicate(), false},
  };
}

int stage_of(int64_t block) {  // 2 stages: the embedding and block 0, then block 1 and the head
  return block == models::CausalLM::kEmbedding || block == 0 ? 0 : 1;
}

TEST(PlacementTest, RowsFollowTheMesh) {
  const PlacementTable t =
      PlacementTable::build(specs(), MeshShape{2, 2, 1, 1, 2}, stage_of, /*zero_stage=*/3, DType::kBF16, DType::kBF16);
  const ParamPlacement& qkv = t.at("h.0.attn.c_attn.weight");
  EXPECT_EQ(qkv.on_axis(MeshAxis::kTP), Placement::shard(1, 3));
  EXPECT_EQ(qkv.on_axis(MeshAxis::kPP), Placement::on_stage(0));
  EXPECT_EQ(qkv.on_axis(MeshAxis::kDP), Placement::flat());  // ZeRO-3 partitions it
  EXPECT_TRUE(qkv.trainable && qkv.state_sharded);
  EXPECT_EQ(qkv.storage, DType::kBF16);
  EXPECT_EQ(qkv.reduce_over, kDataParallelAxes);
  EXPECT_EQ(qkv.sharded_over(), (AxisSet{MeshAxis::kPP, MeshAxis::kDP, MeshAxis::kTP}));
  // Frozen: no reduction group, no state, replicated over the data-parallel axes even under ZeRO-3.
  const ParamPlacement& bias = t.at("h.0.attn.c_attn.bias");
  EXPECT_FALSE(bias.trainable || bias.state_sharded);
  EXPECT_TRUE(bias.reduce_over.empty());
  EXPECT_EQ(bias.on_axis(MeshAxis::kDP), Placement::replicate());
  EXPECT_EQ(t.at("ln_f.weight").stage(), 1);
  EXPECT_EQ(t.on_stage(0).size(), 4u);
  EXPECT_EQ(t.numel(), 40 + 48 + 12 + 4 + 28 + 4);
  EXPECT_EQ(t.trainable_numel(), 40 + 48 + 4 + 28);
  // Stage 1's trainable parameters in one group; the frozen head norm in none.
  const auto groups = t.reduction_groups(1);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].first, kDataParallelAxes);
  EXPECT_EQ(groups[0].second, std::vector<std::string>{"h.1.mlp.c_proj.weight"});
  EXPECT_NE(t.str().find("h.0.attn.c_attn.bias (12,) pp:stage 0 dp:replicate tp:shard(0, 3 blocks) frozen bf16"), std::string::npos)
      << t.str();
  EXPECT_THROW(t.at("nope"), Error);
}

TEST(PlacementTest, OneDeviceReplicatesEverything) {
  const PlacementTable t = PlacementTable::build(specs(), MeshShape{}, stage_of, 0, DType::kF32, DType::kF32);
  for (const ParamPlacement& p : t.params()) {
    EXPECT_TRUE(p.sharded_over().empty()) << p.name;
    EXPECT_EQ(p.stage(), 0) << p.name;
    EXPECT_EQ(p.local_shape(1, 0), p.shape) << p.name;
    EXPECT_FALSE(p.state_sharded) << p.name;
  }
}

TEST(PlacementTest, UnevenSplitsAndBlocks) {
  const PlacementTable t = PlacementTable::build(specs(), MeshShape{1, 1, 1, 1, 3}, stage_of, 0, DType::kF32, DType::kF32);
  // 7 rows over 3 ranks: 3, 2, 2; the vocabulary's 10: 4, 3, 3.
  EXPECT_EQ(t.at("h.1.mlp.c_proj.weight").local_shape(3, 0), (Shape{3, 4}));
  EXPECT_EQ(t.at("h.1.mlp.c_proj.weight").local_shape(3, 2), (Shape{2, 4}));
  EXPECT_EQ(t.at("wte.weight").local_shape(3, 1), (Shape{3, 4}));
  // c_attn: 3 blocks of 4 columns, each split 2, 1, 1; rank 1 holds column 2 of each block.
  EXPECT_EQ(t.at("h.0.attn.c_attn.weight").local_shape(3, 1), (Shape{4, 3}));
  const std::vector<Box> boxes = t.tp_boxes("h.0.attn.c_attn.weight", 1);
  ASSERT_EQ(boxes.size(), 3u);
  for (int b = 0; b < 3; ++b) {
    EXPECT_EQ(boxes[static_cast<size_t>(b)].offsets, (std::vector<int64_t>{0, 4 * b + 2}));
    EXPECT_EQ(boxes[static_cast<size_t>(b)].shape, (Shape{4, 1}));
  }
  // local_from_full takes exactly those columns.
  std::vector<float> v(48);
  for (int i = 0; i < 48; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
  const Tensor local = t.local_from_full("h.0.attn.c_attn.weight", from_vector(v, Shape{4, 12}), 1);
  const std::vector<float> got = to_vector<float>(local);
  for (int r = 0; r < 4; ++r)
    for (int b = 0; b < 3; ++b) EXPECT_EQ(got[static_cast<size_t>(r * 3 + b)], static_cast<float>(r * 12 + 4 * b + 2));
  // A replicated parameter: the tensor itself.
  const Tensor ln = from_vector(std::vector<float>{1, 2, 3, 4}, Shape{4});
  EXPECT_EQ(t.local_from_full("h.0.ln_1.weight", ln, 2).data_ptr<float>(), ln.data_ptr<float>());
  EXPECT_THROW(t.local_from_full("h.0.attn.c_attn.weight", ln, 0), Error);
}

TEST(PlacementTest, RejectsSplitsThatDoNotFit) {
  std::vector<ParamSpec> s = {{"w", Shape{4, 5}, 0, Placement::shard(1, 3), true}};
  EXPECT_THROW(PlacementTable::build(s, MeshShape{1, 1, 1, 1, 2}, stage_of, 0, DType::kF32, DType::kF32), Error);
  s = {{"w", Shape{4}, 0, Placement::replicate(), true}, {"w", Shape{4}, 0, Placement::replicate(), true}};
  EXPECT_THROW(PlacementTable::build(s, MeshShape{}, stage_of, 0, DType::kF32, DType::kF32), Error);
}

TEST(PlacementTest, ShardRanges) {
  EXPECT_EQ(shard_range(10, 4, 0), (std::pair<int64_t, int64_t>{0, 3}));
  EXPECT_EQ(shard_range(10, 4, 1), (std::pair<int64_t, int64_t>{3, 3}));
  EXPECT_EQ(shard_range(10, 4, 2), (std::pair<int64_t, int64_t>{6, 2}));
  EXPECT_EQ(shard_range(10, 4, 3), (std::pair<int64_t, int64_t>{8, 2}));
}

}  // namespace
}  // namespace trident::parallel
