// The manifest of a checkpoint directory (manifest.json): which files the checkpoint has, with
// each file's size and CRC-32C, and an index saying where every logical tensor's values are,
// including tensors split into shards across files (the sharded checkpoints of issue #5).
//
// Schema, format version 1 (every key required unless marked optional; unknown keys are
// errors, so a newer format must bump "version"):
//
//   {
//     "format": "trident-checkpoint",
//     "version": 1,
//     "name": "step_000100",
//     "metadata": {"step": "100", ...},                   string -> string, caller-defined
//     "files": [                                           every file except manifest.json and
//       {"name": "model.safetensors",                      DONE; names have no '/' and do not
//        "size": 497759232,                                start with '.'
//        "crc32c": "1a2b3c4d"},                            8 lowercase hex digits
//       {"name": "state.json", "size": 312, "crc32c": "..."}
//     ],
//     "tensors": {                                         logical name -> where it is stored
//       "wte.weight": {
//         "dtype": "F32", "shape": [50257, 768],           safetensors dtype names
//         "shards": [
//           {"file": "model.safetensors", "key": "wte.weight",
//            "offsets": [0, 0], "shape": [50257, 768]}     a box shard (here: all of it)
//         ]},
//       "optim.exp_avg.wte.weight": {
//         "dtype": "F32", "shape": [50257, 768],
//         "shards": [
//           {"file": "optim.rank00000.safetensors", "key": "exp_avg.wte.weight",
//            "flat_range": [0, 19298688]},                  a flat shard
//           {"file": "optim.rank00001.safetensors", "key": "exp_avg.wte.weight",
//            "flat_range": [19298688, 38597376]}]}
//     }
//   }
//
// Note [Two kinds of shard]
// Why both? Tensor parallelism splits a tensor into rectangular blocks along its dims: a *box*
// shard stores the block starting at index "offsets" (one per dim) with extent "shape" (the
// stored tensor's shape), as torch.distributed.checkpoint's chunks do. ZeRO partitions a
// flattened parameter (or a flat buffer of many) evenly by element count, so a partition can
// start and end mid-row: a *flat* shard stores elements [begin, end) of the tensor's row-major
// flattening as a 1-D tensor. Resharding on load (ZeRO N -> M ranks, stage changes) is then
// "read elements [b, e) of logical tensor X" over whichever shards intersect [b, e), with no
// knowledge of how the writer was laid out. The shards of one tensor are all of one kind,
// cover it exactly once (no gap, no overlap), and each stored tensor has the logical dtype.
// An unsharded tensor is one box shard at offsets 0 with the full shape.
//
// Not here: reading or writing the directory (checkpoint_dir.h), the meaning of any file or
// tensor name (the training loop's business).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/safetensors.h"
#include "core/status.h"

namespace trident::checkpoint {

inline constexpr const char* kManifestFormat = "trident-checkpoint";
inline constexpr int kManifestVersion = 1;

struct ManifestFile {
  std::string name;
  uint64_t size = 0;
  uint32_t crc32c = 0;
};

struct TensorShard {
  enum class Kind { kBox, kFlat };
  std::string file;  // a file listed in the manifest: a safetensors file
  std::string key;   // the stored tensor's name inside that file
  Kind kind = Kind::kBox;
  std::vector<int64_t> offsets;  // kBox: index of the block's first element, per dim
  Shape shape;                   // kBox: the block's extent per dim (= the stored shape)
  int64_t flat_begin = 0;        // kFlat: elements [flat_begin, flat_end) of the flattening
  int64_t flat_end = 0;

  static TensorShard whole(std::string file, std::string key, const Shape& shape);
  static TensorShard box(std::string file, std::string key, std::vector<int64_t> offsets,
                         const Shape& shape);
  static TensorShard flat(std::string file, std::string key, int64_t begin, int64_t end);

  // The shape of the tensor stored under `key`.
  Shape stored_shape() const { return kind == Kind::kBox ? shape : Shape{flat_end - flat_begin}; }
  // Whether this one shard holds every element of a tensor of `full` shape.
  bool covers_whole(const Shape& full) const;
};

struct ManifestTensor {
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<TensorShard> shards;
};

struct Manifest {
  std::string name;
  StringMap metadata;
  std::vector<ManifestFile> files;
  std::map<std::string, ManifestTensor, std::less<>> tensors;

  const ManifestFile* find_file(std::string_view name) const;
};

// Names a checkpoint's own files may have: non-empty, at most 255 bytes, no '/' or NUL, not
// starting with '.' (temporaries), not "manifest.json" or "DONE".
bool is_valid_checkpoint_file_name(std::string_view name);

// The invariants above: valid unique file names; for every tensor, shards that name listed
// files, have the right rank, lie inside the tensor and cover it exactly once.
// `where` prefixes the messages.
Status validate_manifest(const Manifest& manifest, const std::string& where);

// JSON text (indented, for people reading it), and back (validated).
std::string manifest_to_json(const Manifest& manifest);
StatusOr<Manifest> parse_manifest(std::string_view text, const std::string& where);

}  // namespace trident::checkpoint
