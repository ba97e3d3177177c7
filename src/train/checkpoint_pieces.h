// What each rank writes into a checkpoint, from the placement table alone: one path for every
// layout (one process, data parallel, ZeRO 1-3, tensor and pipeline parallel and their
// compositions), with no knowledge of which strategy runs.
//
// Note [Checkpoints from placements]
// Tensors keep their single-device (logical) names and shapes: the weights under the
// parameters' names (the fp32 values the optimizer steps: the masters under mixed precision;
// a frozen parameter's own values, in its storage dtype) and AdamW's state as
// "<param>.exp_avg" and ".exp_avg_sq". The update strategy says what this rank holds of each
// (UpdateStrategy::held_pieces: whole, the same on every rank of the reduction group; or a
// flat range of its local tensor, partitioned among them, under ZeRO), and the table says
// where the local tensor sits in the logical one. A rank writes:
//   - only its pipeline stage's parameters;
//   - a tensor replicated over tensor parallelism only on tp rank 0, a split one on every
//     tp rank (its part);
//   - a tensor held whole only on rank 0 of its reduction group (frozen: of the data-parallel
//     group), a partitioned one on every rank (its range);
//   - its own compressed-gradient state (error feedback) as "rank<R>.<name>", whole: state
//     that differs between ranks, which a resume reads back on the same rank (so it needs as
//     many ranks).
// Each written piece is a manifest shard (checkpoint/manifest.h): a flat shard for a range of
// a tensor tensor parallelism does not split (its local tensor is the logical one), else box
// shards: a split tensor's part is one box per block (GPT-2's c_attn: its slice of q, k and
// v), and a range of it is first cut into the few row-major boxes it covers (flat_range_boxes).
// So every logical tensor's shards are of one kind and cover it exactly once, and a reader
// assembles any tensor, or any range of one, whatever layout wrote it: a checkpoint reshards
// on load.
//
// Files: when rank 0 alone writes and holds every tensor whole (one process, data
// parallelism), the weights go to model.safetensors (as Hugging Face's loader reads them:
// "format": "pt") and the state to optimizer.safetensors; otherwise every rank that writes
// anything writes shard.rank<R>.safetensors into the staging directory rank 0 opened (so the
// ranks need a shared filesystem), the ranks gather each other's shard lists and file sizes
// and checksums, and rank 0 lists them all in the manifest and commits: manifest and DONE
// last, so a crash leaves no checkpoint rather than part of one.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/manifest.h"
#include "core/tensor.h"
#include "nn/module.h"
#include "parallel/placement.h"
#include "parallel/update_strategy.h"

namespace trident::train {

// The row-major boxes that elements [begin, end) of a tensor of `shape` cover, in order: each
// box is contiguous in the flattening, and there are at most 2 x dims - 1 of them.
std::vector<parallel::Box> flat_range_boxes(const Shape& shape, int64_t begin, int64_t end);

// One shard this rank writes: of logical tensor `tensor` (dtype, logical shape), stored under
// `shard.key` (shard.file is filled by the writer).
struct WrittenShard {
  std::string tensor;
  DType dtype = DType::kF32;
  Shape shape;
  checkpoint::TensorShard shard;
  std::optional<Tensor> values;  // contiguous, the stored shape; absent from shards_from_json
  // Set instead of `values` for a piece read only when it is written (HeldPiece::load): returns
  // the stored shape's values, contiguous.
  std::function<Tensor()> load;
  // The values, read now if they are loaded lazily.
  Tensor get() const { return values ? *values : load(); }
};

// Where this rank is: its pipeline stage, its tensor-parallel rank, its world rank, and its
// rank in the group of each axis set (a reduction group's rank 0 writes what the group holds
// whole).
struct RankCoords {
  int stage = 0;
  int tp_rank = 0;
  int world_rank = 0;
  std::function<int(parallel::AxisSet)> group_rank;
};

// The shards this rank writes (Note [Checkpoints from placements]): of `held` (the strategy's
// pieces), `frozen` (this rank's frozen parameters, their local tensors) and `rank_state`
// (written as "rank<R>.<name>").
std::vector<WrittenShard> rank_shards(const parallel::PlacementTable& table, const RankCoords& at,
                                      const std::vector<parallel::HeldPiece>& held,
                                      const std::vector<nn::NamedTensor>& frozen,
                                      const std::vector<nn::NamedTensor>& rank_state);

// "rank<R>.<name>", and whether a checkpoint tensor's name is one.
std::string rank_state_name(int rank, const std::string& name);
bool is_rank_state(const std::string& name);

// The shards' descriptions (not their values) as JSON text, and back: what the ranks gather
// so that rank 0 lists every rank's shards. `file` is every shard's file.
std::string shards_to_json(const std::vector<WrittenShard>& shards);
std::vector<WrittenShard> shards_from_json(const std::string& text, const std::string& file);

}  // namespace trident::train
