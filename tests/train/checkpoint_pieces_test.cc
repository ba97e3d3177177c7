// What each rank writes into a checkpoint (train/checkpoint_pieces.h): the row-major boxes of
// a flat range, and every rank's shards of a simulated layout reassembled into the logical
// tensors, bit for bit, for tensor parallelism with fused blocks and uneven splits under
// ZeRO's flat partitions, replicated tensors written once, frozen ones and per-rank state.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/check.h"
#include "core/factory.h"
#include "core/views.h"
#include "parallel/placement.h"
#include "train/checkpoint_pieces.h"

namespace trident::train {
namespace {

using parallel::Box;
using parallel::MeshAxis;
using parallel::Placement;

int64_t ravel(const std::vector<int64_t>& idx, const std::vector<int64_t>& dims) {
  int64_t at = 0;
  for (size_t a = 0; a < dims.size(); ++a) at = at * dims[a] + idx[a];
  return at;
}

// The flat indices a box covers, in row-major order of the box.
std::vector<int64_t> covered(const Box& b, const std::vector<int64_t>& dims) {
  std::vector<int64_t> out;
  std::vector<int64_t> i(dims.size(), 0);
  const int64_t n = b.shape.product();
  for (int64_t k = 0; k < n; ++k) {
    std::vector<int64_t> at(dims.size());
    for (size_t a = 0; a < dims.size(); ++a) at[a] = b.offsets[a] + i[a];
    out.push_back(ravel(at, dims));
    for (int a = static_cast<int>(dims.size()) - 1; a >= 0; --a)
      if (++i[static_cast<size_t>(a)] < b.shape[a]) break;
      else i[static_cast<size_t>(a)] = 0;
  }
  return out;
}

TEST(CheckpointPiecesTest, FlatRangesBecomeContiguousBoxes) {
  for (const Shape& shape : {Shape{7}, Shape{3, 4}, Shape{3, 4, 5}, Shape{2, 1, 3}, Shape{1, 6}, Shape{2, 3, 2, 2}}) {
    const std::vector<int64_t> dims = shape.vec();
    const int64_t n = shape.product();
    for (int64_t b = 0; b <= n; ++b)
      for (int64_t e = b; e <= n; ++e) {
        const std::vector<Box> boxes = flat_range_boxes(shape, b, e);
        EXPECT_LE(boxes.size(), 2 * dims.size() - 1 + (b == e ? 0 : 0)) << shape << " [" << b << ", " << e << ")";
        // In order, each contiguous, together exactly [b, e).
        int64_t next = b;
        for (const Box& box : boxes) {
          for (int64_t i : covered(box, dims)) ASSERT_EQ(i, next++) << shape << " [" << b << ", " << e << ")";
        }
        EXPECT_EQ(next, e) << shape << " [" << b << ", " << e << ")";
      }
  }
  EXPECT_EQ(flat_range_boxes(Shape{}, 0, 1).size(), 1u);
  EXPECT_TRUE(flat_range_boxes(Shape{3, 4}, 5, 5).empty());
  EXPECT_THROW(flat_range_boxes(Shape{3, 4}, 5, 13), Error);
}

// A logical tensor of distinct values.
Tensor iota(const Shape& shape, float base) {
  std::vector<float> v(static_cast<size_t>(shape.product()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = base + static_cast<float>(i);
  return from_vector(v, shape);
}

// Assembles every logical tensor from the shards all ranks wrote, checking each element is
// written exactly once.
std::map<std::string, std::vector<float>> assemble(const std::vector<WrittenShard>& shards,
                                                   std::map<std::string, Shape>& shapes) {
  std::map<std::string, std::vector<float>> out;
  std::map<std::string, std::vector<int>> hits;
  for (const WrittenShard& s : shards) {
    shapes[s.tensor] = s.shape;
    auto& v = out[s.tensor];
    auto& h = hits[s.tensor];
    v.resize(static_cast<size_t>(s.shape.product()), -1.0f);
    h.resize(v.size(), 0);
    const std::vector<float> values = to_vector<float>(s.get());
    std::vector<int64_t> at;
    if (s.shard.kind == checkpoint::TensorShard::Kind::kFlat) {
      for (int64_t i = s.shard.flat_begin; i < s.shard.flat_end; ++i) at.push_back(i);
    } else {
      at = covered({s.shard.offsets, s.shard.shape}, s.shape.vec());
    }
    EXPECT_EQ(at.size(), values.size()) << s.tensor;
    for (size_t k = 0; k < at.size(); ++k) {
      v[static_cast<size_t>(at[k])] = values[k];
      ++h[static_cast<size_t>(at[k])];
    }
  }
  for (const auto& [name, h] : hits)
    for (size_t i = 0; i < h.size(); ++i) EXPECT_EQ(h[i], 1) << name << " element " << i;
  return out;
}

// tp x dp ranks of one stage; each dp rank holds a range of every trainable local tensor
// (ZeRO), cut at `cuts` fractions, or (zero = false) the whole tensor.
void check_layout(int tp, int dp, bool zero) {
  SCOPED_TRACE("tp " + std::to_string(tp) + " dp " + std::to_string(dp) + (zero ? " zero" : ""));
  const std::vector<parallel::ParamSpec> specs = {
      {"qkv", Shape{5, 12}, 0, Placement::shard(1, 3), true},   // fused blocks, uneven over 3
      {"proj", Shape{7, 5}, 0, Placement::shard(0), true},      // uneven rows
      {"ln", Shape{5}, 0, Placement::replicate(), true},        // replicated over tp
      {"frozen", Shape{6, 5}, 0, Placement::shard(0), false},   // frozen, split
      {"frozen_ln", Shape{5}, 0, Placement::replicate(), false},
  };
  const parallel::MeshShape mesh{1, dp, 1, 1, tp};
  const parallel::PlacementTable table =
      parallel::PlacementTable::build(specs, mesh, [](int64_t) { return 0; }, zero ? 1 : 0, DType::kF32, DType::kF32);
  std::map<std::string, Tensor> logical;
  float base = 0;
  for (const auto& s : specs) {
    logical.emplace(s.name, iota(s.shape, base));
    logical.emplace(s.name + ".exp_avg", iota(s.shape, base + 1000));
    base += 10000;
  }
  std::vector<WrittenShard> all;
  int loads = 0;
  for (int t = 0; t < tp; ++t)
    for (int d = 0; d < dp; ++d) {
      std::vector<parallel::HeldPiece> held;
      std::vector<nn::NamedTensor> frozen;
      for (const auto& s : specs) {
        const Tensor local = table.local_from_full(s.name, logical.at(s.name), t);
        if (!s.trainable) {
          frozen.emplace_back(s.name, local);
          continue;
        }
        for (const std::string& tensor : {s.name, s.name + ".exp_avg"}) {
          const Tensor l = core::contiguous(table.local_from_full(s.name, logical.at(tensor), t));
          const Tensor flat = views::view(l, {l.numel()});
          if (!zero) {
            held.push_back({tensor, s.name, 0, l.numel(), false, l, {}});
            continue;
          }
          const int64_t n = l.numel(), b = n * d / dp, e = n * (d + 1) / dp;  // uneven, mid-row cuts
          if (b >= e) continue;
          const Tensor piece = views::narrow(flat, 0, b, e - b);
          // The state's pieces come as loaders (ZeRO's state on NVMe), read only when written.
          if (tensor.ends_with(".exp_avg"))
            held.push_back({tensor, s.name, b, e, true, std::nullopt, [piece, &loads] {
                              ++loads;
                              return core::contiguous(piece);
                            }});
          else
            held.push_back({tensor, s.name, b, e, true, piece, {}});
        }
      }
      const std::vector<nn::NamedTensor> state = {{"err", from_vector(std::vector<float>{float(t), float(d)}, Shape{2})}};
      RankCoords at{0, t, d * tp + t, [&](parallel::AxisSet) { return d; }};
      const int before = loads;
      std::vector<WrittenShard> mine = rank_shards(table, at, held, frozen, state);
      EXPECT_EQ(loads, before) << "a lazy piece was read before it was written";
      // What travels to rank 0 describes them exactly.
      const std::vector<WrittenShard> described = shards_from_json(shards_to_json(mine), "f");
      ASSERT_EQ(described.size(), mine.size());
      for (size_t i = 0; i < mine.size(); ++i) {
        EXPECT_EQ(described[i].tensor, mine[i].tensor);
        EXPECT_EQ(described[i].shape, mine[i].shape);
        EXPECT_EQ(described[i].shard.key, mine[i].shard.key);
        EXPECT_EQ(described[i].shard.stored_shape(), mine[i].get().shape());
        EXPECT_EQ(described[i].shard.file, "f");
      }
      std::set<std::string> keys;
      for (const WrittenShard& w : mine) EXPECT_TRUE(keys.insert(w.shard.key).second) << w.shard.key;
      all.insert(all.end(), mine.begin(), mine.end());
    }
  std::map<std::string, Shape> shapes;
  const auto got = assemble(all, shapes);
  for (const auto& [name, t] : logical) {
    if (name == "frozen.exp_avg" || name == "frozen_ln.exp_avg") {
      EXPECT_FALSE(got.contains(name));  // a frozen parameter has no state
      continue;
    }
    ASSERT_TRUE(got.contains(name)) << name;
    EXPECT_EQ(shapes.at(name), t.shape()) << name;
    EXPECT_EQ(got.at(name), to_vector<float>(t)) << name;
  }
  // Every rank's own state, under its world rank.
  EXPECT_EQ(got.size(), logical.size() - 2 + static_cast<size_t>(tp * dp));
  EXPECT_TRUE(got.contains("rank0.err"));
  EXPECT_TRUE(is_rank_state("rank12.err") && !is_rank_state("rank.err") && !is_rank_state("qkv"));
}

TEST(CheckpointPiecesTest, EveryLayoutReassembles) {
  for (int tp : {1, 2, 3})
    for (int dp : {1, 2, 3})
      for (bool zero : {false, true}) check_layout(tp, dp, zero);
}

TEST(CheckpointPiecesTest, OneRankWritesWholeTensors) {
  // One process: every tensor one whole box (what model.safetensors holds).
  const std::vector<parallel::ParamSpec> specs = {{"w", Shape{3, 4}, 0, Placement::replicate(), true}};
  const parallel::PlacementTable table =
      parallel::PlacementTable::build(specs, {}, [](int64_t) { return 0; }, 0, DType::kF32, DType::kF32);
  const Tensor w = iota(Shape{3, 4}, 0);
  const auto shards = rank_shards(table, {0, 0, 0, [](parallel::AxisSet) { return 0; }}, {{"w", "w", 0, 12, false, w, {}}}, {}, {});
  ASSERT_EQ(shards.size(), 1u);
  EXPECT_TRUE(shards[0].shard.covers_whole(Shape{3, 4}));
  EXPECT_EQ(shards[0].values->shape(), (Shape{3, 4}));
}

}  // namespace
}  // namespace trident::train
