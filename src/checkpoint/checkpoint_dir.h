// Checkpoint directories: a set of files that appears all at once or not at all, and that is
// verified (sizes, CRC-32C checksums, tensor index) before anything is loaded from it.
//
// Layout of a checkpoint root:
//   <root>/step_000100/              a complete checkpoint
//       model.safetensors, ...       the caller's files
//       manifest.json                every file's size and CRC-32C, the tensor index, metadata
//                                    (schema in manifest.h)
//       DONE                         written last: the manifest's size and CRC-32C
//   <root>/.tmp-step_000200/         a checkpoint being written, or abandoned by a crash
//   <root>/.deleting-step_000050/    a checkpoint being pruned
//
// The write protocol (CheckpointWriter):
//   1. create <root>/.tmp-<name> (replacing a stale one a crash left);
//   2. write each file there atomically: temporary name, fsync, rename, fsync the directory
//      (atomic_file.h), computing its size and CRC-32C on the way;
//   3. commit: write manifest.json the same way, then DONE (holding the manifest's size and
//      CRC-32C), then rename the directory to <root>/<name> and fsync <root>.
// Nothing in <root>/<name> exists until step 3's rename, and everything inside is durable
// before it, so after a crash at any point <root>/<name> is either absent or complete. Older
// checkpoints are never written to; a name that exists is never overwritten.
//
// DONE is JSON: {"format": "trident-checkpoint-done", "version": 1,
//                "manifest_size": 1234, "manifest_crc32c": "1a2b3c4d"}
//
// Loading (CheckpointReader::open) refuses, with a message naming the checkpoint, the file and
// the problem: a missing directory or DONE marker, a DONE or manifest that does not parse or
// whose size/checksum disagree, a listed file that is missing, has the wrong size or the wrong
// CRC-32C, and an index entry whose shard is not in its file with the declared dtype and shape.
//
// Concurrency: one writer per root at a time (prune_checkpoints also assumes no writer is
// running: it removes stale temporaries). Issue #5's ranks share one writer: rank 0 begins and
// commits; other ranks write their files into staging_dir() with write_file_atomically or
// AtomicFileWriter and send rank 0 the ManifestFile and shard entries to add.
//
// Not here: what the files mean (model weights, optimizer state, RNG: the training loop), the
// communication between ranks (issue #5), asynchronous saving.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/env.h"
#include "checkpoint/manifest.h"
#include "checkpoint/safetensors.h"
#include "core/status.h"
#include "core/tensor.h"

namespace trident::checkpoint {

inline constexpr const char* kManifestFileName = "manifest.json";
inline constexpr const char* kDoneFileName = "DONE";
inline constexpr const char* kStagingPrefix = ".tmp-";
inline constexpr const char* kDeletingPrefix = ".deleting-";

// <root>/.tmp-<name>: where checkpoint `name` is written before it is committed. Ranks that
// write their own files into it (sharded checkpoints) compute it with this.
std::string staging_dir_for(std::string_view root, std::string_view name);

class CheckpointWriter {
 public:
  // Starts checkpoint `name` (no '/', not starting with '.') under `root`, creating `root` if
  // needed. Fails if <root>/<name> already exists.
  static StatusOr<CheckpointWriter> begin(Env* env, std::string root, std::string name);

  CheckpointWriter(CheckpointWriter&& other) noexcept;
  CheckpointWriter& operator=(CheckpointWriter&&) = delete;
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;
  // Without a successful commit(), removes the staging directory (best effort).
  ~CheckpointWriter();

  const std::string& staging_dir() const { return staging_dir_; }
  const std::string& final_dir() const { return final_dir_; }

  // Writes a file of the checkpoint. Throws (ValueError) on an invalid or repeated name.
  Status write_file(const std::string& name, std::string_view contents);
  // Writes a safetensors file and indexes every tensor in it under its own name as an
  // unsharded tensor (one whole shard). Throws on a logical name already indexed.
  Status write_safetensors(const std::string& name, std::span<const NamedTensor> tensors,
                           const StringMap& metadata = {});
  // The same for tensors whose values are asked of `load` only as each is written (one in
  // memory at a time: write_safetensors_streamed).
  Status write_safetensors_streamed(const std::string& name, std::span<const TensorSpec> specs,
                                    const std::function<StatusOr<Tensor>(size_t)>& load,
                                    const StringMap& metadata = {});
  // Lists a file someone else wrote into staging_dir() (another rank); commit checks that it
  // is there with this size.
  void add_file(ManifestFile file);
  // Records that `shard` holds part of logical tensor `name`, whose dtype and full shape are
  // given (the same in every call for one name). Coverage is checked at commit.
  void add_tensor_shard(const std::string& name, DType dtype, const Shape& shape,
                        TensorShard shard);
  void set_metadata(std::string key, std::string value);

  // Writes manifest.json and DONE and moves the checkpoint into place; returns its final
  // directory. A manifest that fails validate_manifest is an error here, before DONE.
  StatusOr<std::string> commit();

 private:
  CheckpointWriter(Env* env, std::string root, std::string staging, std::string final_dir,
                   std::string name);
  void check_new_file_name(const std::string& name) const;

  Env* env_ = nullptr;
  std::string root_;
  std::string staging_dir_;
  std::string final_dir_;
  Manifest manifest_;
  bool active_ = false;  // false once committed or moved from
};

struct CheckpointReadOptions {
  // Read every file once at open to check its CRC-32C (sizes are always checked). Turning it
  // off trades detection of silent corruption for one full read of the checkpoint.
  bool verify_checksums = true;
};

// A verified, complete checkpoint. Move-only. Loads may run on several threads at once.
class CheckpointReader {
 public:
  static StatusOr<CheckpointReader> open(Env* env, std::string dir,
                                         CheckpointReadOptions options = {});

  const std::string& dir() const { return dir_; }
  const Manifest& manifest() const { return manifest_; }

  // A whole file of the checkpoint (checked against the manifest's size and CRC-32C again).
  StatusOr<std::string> read_file(const std::string& name) const;
  // A file of the checkpoint as safetensors, opened once and then shared.
  StatusOr<std::shared_ptr<const SafetensorsReader>> safetensors(const std::string& name) const;

  bool has_tensor(std::string_view name) const { return manifest_.tensors.contains(name); }
  // Logical tensor `name`, assembled from its shards: memory for the result plus one shard.
  StatusOr<Tensor> load_tensor(std::string_view name) const;
  // Elements [begin, end) of logical tensor `name`'s row-major flattening, as a 1-D tensor:
  // the read a rank makes to take its partition under a new layout. Flat-sharded and
  // unsharded tensors read only the bytes needed; box-sharded ones assemble the whole tensor.
  StatusOr<Tensor> load_flat_range(std::string_view name, int64_t begin, int64_t end) const;

 private:
  CheckpointReader() = default;

  Env* env_ = nullptr;
  std::string dir_;
  Manifest manifest_;
  std::unique_ptr<std::mutex> mutex_;  // guards open_files_
  mutable std::map<std::string, std::shared_ptr<const SafetensorsReader>> open_files_;
};

// ---- a root holding checkpoints named by step ----

// "step_000100": the step zero-padded to at least 6 digits.
std::string step_checkpoint_name(int64_t step);
// The step of a name step_checkpoint_name made, else nullopt.
std::optional<int64_t> parse_step_checkpoint_name(std::string_view name);

struct CheckpointListing {
  std::string name;
  int64_t step = 0;
  bool complete = false;  // has a DONE marker (not otherwise verified)
};

// The step checkpoints in `root` (directories named by step_checkpoint_name), by increasing
// step; empty if `root` does not exist. Other entries are ignored.
StatusOr<std::vector<CheckpointListing>> list_step_checkpoints(Env* env, const std::string& root);
// The directory of the newest complete step checkpoint in `root`, or nullopt if none. It is
// not verified here: CheckpointReader::open does that, and refuses it loudly if it is corrupt
// rather than silently falling back to an older one.
StatusOr<std::optional<std::string>> find_latest_checkpoint(Env* env, const std::string& root);
// The step checkpoints in `root` newer than its newest complete one (all of them if none is
// complete), by increasing step: writes cut short, which find_latest_checkpoint passes over.
StatusOr<std::vector<std::string>> incomplete_after_latest(Env* env, const std::string& root);
// Removes complete step checkpoints older than the newest `keep_last` (>= 1), each renamed to
// a scratch name first so a half-removed one is never mistaken for a checkpoint, and removes
// staging and scratch directories left by crashes. Incomplete step directories (no DONE) are
// left for a person to look at.
Status prune_checkpoints(Env* env, const std::string& root, int keep_last);

}  // namespace trident::checkpoint
