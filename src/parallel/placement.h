// Parameter placements as data: for every parameter of a run, its logical (single-device)
// shape, what the ranks along each named mesh axis hold of it, whether it trains, the dtype
// the model stores it in and the group its gradient is averaged over. DTensor's placements
// (Replicate, Shard(dim)) reduced to metadata: no new tensor type, the parameters stay plain
// tensors holding this rank's part.
//
// parallelize() builds the run's table once (parallel/parallelize.h), after tensor
// parallelism and the pipeline, and everything downstream reads it: the update strategies
// take the trainable parameters grouped by reduction group (frozen ones are neither reduced,
// stepped nor given state), checkpoints write and read each tensor's boxes and ranges from
// it, the planner builds the same table from the family's shapes (models/model_shapes.h)
// with the same function, and the MFU counts trainable parameters from it.
//
// Note [Placements]
// Per mesh axis (parallel/mesh.h), a parameter is
//   replicate        every rank along the axis holds the same values (dp, ep and cp for
//                    dense parameters; tp for norms, position embeddings, row-wise biases)
//   shard(d, k)      dim d holds k equal blocks (3 for GPT-2's fused q, k, v), each divided
//                    into contiguous ranges, one per rank, the first ranks one longer when it
//                    does not divide (tensor parallelism's split)
//   stage(s)         only the ranks at coordinate s hold it (a pipeline stage's blocks)
//   flat             the elements of its flattening are partitioned among the ranks in an
//                    order the update strategy chooses (ZeRO-3's buckets); the table says
//                    only that they are
// An expert's parameters sit on one ep coordinate (stage(s) along ep: the ranks holding
// experts [s E/ep, (s + 1) E/ep)) and their gradients are averaged over dp x cp, the ranks
// holding the same experts (Megatron's expert-data-parallel group), not over ep.
// Beside the parameter, its optimizer state (fp32 masters and AdamW's moments) is flat-sharded
// over the reduction group under ZeRO 1-3 (`state_sharded`), whole on every rank otherwise.
// A frozen parameter has no state, no gradient and no reduction group, and is replicated over
// the data-parallel axes whatever the ZeRO stage.
//
// Not here: how a strategy lays its shards out (zero.h), how a style computes with a shard
// (tp_styles.h), how a checkpoint names its files (train/checkpoint_pieces.h).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"
#include "core/tensor.h"
#include "parallel/mesh.h"

namespace trident::parallel {

struct Placement {
  enum class Kind { kReplicate, kShard, kStage, kFlat };
  Kind kind = Kind::kReplicate;
  int64_t dim = 0;     // kShard
  int64_t blocks = 1;  // kShard: equal blocks along dim, each split among the ranks
  int stage = 0;       // kStage: the coordinate that holds it

  static Placement replicate() { return {}; }
  static Placement shard(int64_t dim, int64_t blocks = 1) { return {Kind::kShard, dim, blocks, 0}; }
  static Placement on_stage(int stage) { return {Kind::kStage, 0, 1, stage}; }
  static Placement flat() { return {Kind::kFlat, 0, 1, 0}; }
  bool is_shard() const { return kind == Kind::kShard; }
  // "replicate", "shard(0)", "shard(1, 3 blocks)", "stage 2", "flat".
  std::string str() const;
  bool operator==(const Placement&) const = default;
};

// [begin, begin + length) of an extent divided among n ranks: rank r's range, the first
// extent % n ranks one longer (so every range is non-empty when extent >= n).
std::pair<int64_t, int64_t> shard_range(int64_t extent, int n, int r);

// Rank r's part of `full` split by `split` (shard(dim, blocks)) over n ranks: range r of each
// of the blocks along dim, side by side, in a new contiguous tensor.
Tensor shard_of_full(const Tensor& full, const Placement& split, int n, int r);

// One row of the table.
struct ParamPlacement {
  std::string name;              // as Module::named_parameters() names it
  Shape shape;                   // logical: on one device
  int64_t block = 0;             // CausalLM::block_of: a block index, kEmbedding or kHead
  std::array<Placement, kNumMeshAxes> on{};  // per MeshAxis
  bool trainable = true;
  DType storage = DType::kF32;   // the dtype the model holds it in
  AxisSet reduce_over;           // the axes its gradient is averaged over; {} when frozen
  bool state_sharded = false;    // ZeRO 1-3: masters and optimizer state flat over reduce_over

  const Placement& on_axis(MeshAxis a) const { return on[static_cast<size_t>(a)]; }
  // The pipeline stage that holds it (0 without a pipeline).
  int stage() const { return on_axis(MeshAxis::kPP).stage; }
  // An expert's parameter placed by expert parallelism: only the ranks at ep coordinate
  // expert_rank() hold it.
  bool on_ep_rank() const { return on_axis(MeshAxis::kEP).kind == Placement::Kind::kStage; }
  int expert_rank() const { return on_axis(MeshAxis::kEP).stage; }
  bool tp_split() const { return on_axis(MeshAxis::kTP).is_shard(); }
  // Its shape on rank `tp_rank` of `tp` tensor-parallel ranks.
  Shape local_shape(int tp, int tp_rank) const;
  // The axes along which ranks hold different parts of it (tp when split, pp when staged,
  // dp under ZeRO-3): a global norm sums its squares over these.
  AxisSet sharded_over() const;
};

// Where a part of a parameter's local tensor sits in the logical one.
struct Box {
  std::vector<int64_t> offsets;  // in the logical tensor
  Shape shape;                   // its extent (= the part's shape)
};

// What a row is built from: the parameter and how tensor parallelism splits it (its plan's
// split, or a family's shapes for the planner).
struct ParamSpec {
  std::string name;
  Shape shape;  // logical
  int64_t block = 0;
  Placement tp;  // replicate, or shard(dim, blocks)
  bool trainable = true;
  // A mixture-of-experts layer's expert parameter: its expert of `experts` (-1: not one).
  int64_t expert = -1, experts = 0;
};

class PlacementTable {
 public:
  // The table of a run: every parameter of `specs` on `mesh`, staged by `stage_of_block` (a
  // block index, kEmbedding or kHead -> the pipeline stage; null: one stage), trainable ones
  // stored in `compute` (their masters are fp32), frozen ones in `frozen_storage`, ZeRO
  // `zero_stage` deciding whether state (1-3) and trainable parameters (3) are flat-sharded.
  template <class StageOf>
  static PlacementTable build(const std::vector<ParamSpec>& specs, const MeshShape& mesh, const StageOf& stage_of_block,
                              int64_t zero_stage, DType compute, DType frozen_storage);

  const MeshShape& mesh() const { return mesh_; }
  int64_t zero_stage() const { return zero_stage_; }
  const std::vector<ParamPlacement>& params() const { return params_; }
  // The row of `name`; throws naming it when the table has none.
  const ParamPlacement& at(const std::string& name) const;
  const ParamPlacement* find(const std::string& name) const;
  bool contains(const std::string& name) const { return index_.contains(name); }

  // The rows of pipeline stage `stage`, in table (model) order.
  std::vector<const ParamPlacement*> on_stage(int stage) const;
  // Stage `stage`'s trainable parameters grouped by reduction group: groups in order of their
  // first parameter, parameters in table order.
  std::vector<std::pair<AxisSet, std::vector<std::string>>> reduction_groups(int stage) const;

  // Tensor parallelism's part of parameter `name` on tp rank `tp_rank`: one box per block in
  // the logical tensor (one box, the whole tensor, when it is replicated).
  std::vector<Box> tp_boxes(const std::string& name, int tp_rank) const;
  // This rank's tensor-parallel part of a logical-size tensor of parameter `name` (its value
  // or optimizer state), a new contiguous tensor; `full` itself when replicated.
  Tensor local_from_full(const std::string& name, const Tensor& full, int tp_rank) const;

  // Elements over the whole model: all, trainable, and held by the rank at `coords` (its
  // stage's, its tensor-parallel share).
  int64_t numel() const;
  int64_t trainable_numel() const;
  // A table for people: name, shape, each axis's placement (those of size > 1), trains,
  // storage dtype, reduction group.
  std::string str() const;

 private:
  void add(ParamPlacement row);

  MeshShape mesh_;
  int64_t zero_stage_ = 0;
  std::vector<ParamPlacement> params_;
  std::map<std::string, size_t, std::less<>> index_;
};

// The row of one parameter (what build() does for each spec).
ParamPlacement place_parameter(const ParamSpec& spec, const MeshShape& mesh, int stage, int64_t zero_stage,
                               DType compute, DType frozen_storage);

template <class StageOf>
PlacementTable PlacementTable::build(const std::vector<ParamSpec>& specs, const MeshShape& mesh,
                                     const StageOf& stage_of_block, int64_t zero_stage, DType compute,
                                     DType frozen_storage) {
  PlacementTable t;
  t.mesh_ = mesh;
  t.zero_stage_ = zero_stage;
  for (const ParamSpec& s : specs)
    t.add(place_parameter(s, mesh, mesh.pp > 1 ? stage_of_block(s.block) : 0, zero_stage, compute, frozen_storage));
  return t;
}

}  // namespace trident::parallel
