#include "checkpoint/checkpoint_dir.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <utility>

#include "checkpoint/atomic_file.h"
#include "core/crc32c.h"
#include "checkpoint/status_macros.h"
#include "checkpoint/strict_json.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/views.h"

namespace trident::checkpoint {
namespace {

constexpr const char* kDoneFormat = "trident-checkpoint-done";
constexpr int kDoneVersion = 1;
// Checksums are computed in blocks of this many bytes, so verifying needs no memory for the
// whole file.
constexpr size_t kChecksumBlockBytes = 4 << 20;

bool is_valid_checkpoint_name(std::string_view name) {
  return !name.empty() && name.size() <= 200 && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos && name[0] != '.';
}

std::string done_json(uint64_t manifest_size, uint32_t manifest_crc) {
  nlohmann::ordered_json j;
  j["format"] = kDoneFormat;
  j["version"] = kDoneVersion;
  j["manifest_size"] = manifest_size;
  j["manifest_crc32c"] = core::crc32c_to_hex(manifest_crc);
  return j.dump() + "\n";
}

StatusOr<uint32_t> file_crc32c(Env* env, const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, env->new_random_access_file(path));
  std::string block(std::min<uint64_t>(kChecksumBlockBytes, file->size()), '\0');
  uint32_t crc = 0;
  for (uint64_t at = 0; at < file->size(); at += block.size()) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(block.size(), file->size() - at));
    CKPT_RETURN_IF_ERROR(file->read(at, n, block.data()));
    crc = core::crc32c_extend(crc, block.data(), n);
  }
  return crc;
}

// Checks one listed file's presence, size and (optionally) checksum.
Status verify_file(Env* env, const std::string& dir, const ManifestFile& f, bool checksum,
                   const std::string& where) {
  const std::string path = join_path(dir, f.name);
  if (env->file_type(path) != FileType::kFile) {
    return Status::invalid(where + ": file '" + f.name + "' listed in the manifest is missing");
  }
  CKPT_ASSIGN_OR_RETURN(uint64_t size, env->file_size(path));
  if (size != f.size) {
    return Status::invalid(where + ": file '" + f.name + "' is " + std::to_string(size) +
                           " bytes, the manifest says " + std::to_string(f.size) +
                           (size < f.size ? " (truncated)" : ""));
  }
  if (!checksum) return Status::ok();
  CKPT_ASSIGN_OR_RETURN(uint32_t crc, file_crc32c(env, path));
  if (crc != f.crc32c) {
    return Status::invalid(where + ": file '" + f.name + "' is corrupt: its CRC-32C is " +
                           core::crc32c_to_hex(crc) + ", the manifest says " + core::crc32c_to_hex(f.crc32c));
  }
  return Status::ok();
}

// Reads DONE and manifest.json, checking the manifest against DONE.
StatusOr<Manifest> read_manifest(Env* env, const std::string& dir, const std::string& where) {
  const std::string done_path = join_path(dir, kDoneFileName);
  if (!exists(env, done_path)) {
    return Status::invalid(where + " is incomplete: it has no " + kDoneFileName +
                           " marker (its writing was interrupted, or is still going on)");
  }
  CKPT_ASSIGN_OR_RETURN(std::string done_text, read_file(env, done_path));
  const std::string done_where = where + ": " + kDoneFileName;
  CKPT_ASSIGN_OR_RETURN(nlohmann::json done, parse_json_strict(done_text, done_where));
  const auto format = done.find("format");
  const auto version = done.find("version");
  const auto size = done.find("manifest_size");
  const auto crc = done.find("manifest_crc32c");
  if (!done.is_object() || done.size() != 4 || format == done.end() || *format != kDoneFormat ||
      version == done.end() || *version != kDoneVersion || size == done.end() ||
      !size->is_number_unsigned() || crc == done.end() || !crc->is_string() ||
      !core::crc32c_from_hex(crc->get<std::string>())) {
    return Status::invalid(done_where + " is not a version-1 completion marker: " + done.dump());
  }
  const std::string manifest_path = join_path(dir, kManifestFileName);
  if (!exists(env, manifest_path)) {
    return Status::invalid(where + ": " + kManifestFileName + " is missing");
  }
  CKPT_ASSIGN_OR_RETURN(std::string text, read_file(env, manifest_path));
  const uint64_t want_size = size->get<uint64_t>();
  const uint32_t want_crc = *core::crc32c_from_hex(crc->get<std::string>());
  if (text.size() != want_size) {
    return Status::invalid(where + ": " + kManifestFileName + " is " + std::to_string(text.size()) +
                           " bytes, " + kDoneFileName + " says " + std::to_string(want_size));
  }
  if (core::crc32c(text) != want_crc) {
    return Status::invalid(where + ": " + kManifestFileName + " is corrupt: its CRC-32C is " +
                           core::crc32c_to_hex(core::crc32c(text)) + ", " + kDoneFileName + " says " +
                           core::crc32c_to_hex(want_crc));
  }
  return parse_manifest(text, where + ": " + kManifestFileName);
}

using OpenSafetensors =
    std::function<StatusOr<std::shared_ptr<const SafetensorsReader>>(const std::string& name)>;

// Checks that every shard of the tensor index is in its file with the declared dtype and shape.
Status check_index(const Manifest& m, const OpenSafetensors& open_file, const std::string& where) {
  for (const auto& [name, tensor] : m.tensors) {
    for (const TensorShard& shard : tensor.shards) {
      CKPT_ASSIGN_OR_RETURN(std::shared_ptr<const SafetensorsReader> file, open_file(shard.file));
      const SafetensorsEntry* e = file->find(shard.key);
      const Shape want = shard.stored_shape();
      if (e == nullptr || e->dtype != tensor.dtype || !(e->shape == want)) {
        return Status::invalid(
            where + ": the manifest puts a " + safetensors_dtype_name(tensor.dtype) + " " +
            want.str() + " shard of tensor '" + name + "' under '" + shard.key + "' in '" +
            shard.file + "', but that file " +
            (e == nullptr ? std::string("has no such tensor")
                          : "has it as " + e->dtype_name + " " + e->shape.str()));
      }
    }
  }
  return Status::ok();
}

}  // namespace

// ---- CheckpointWriter ----

CheckpointWriter::CheckpointWriter(Env* env, std::string root, std::string staging,
                                   std::string final_dir, std::string name)
    : env_(env),
      root_(std::move(root)),
      staging_dir_(std::move(staging)),
      final_dir_(std::move(final_dir)),
      active_(true) {
  manifest_.name = std::move(name);
}

CheckpointWriter::CheckpointWriter(CheckpointWriter&& other) noexcept
    : env_(other.env_),
      root_(std::move(other.root_)),
      staging_dir_(std::move(other.staging_dir_)),
      final_dir_(std::move(other.final_dir_)),
      manifest_(std::move(other.manifest_)),
      active_(std::exchange(other.active_, false)) {}

CheckpointWriter::~CheckpointWriter() {
  // Best effort; a staging directory that survives is replaced by the next writer of this name
  // or removed by prune_checkpoints.
  if (active_) (void)remove_tree(env_, staging_dir_);
}

std::string staging_dir_for(std::string_view root, std::string_view name) {
  return join_path(root, std::string(kStagingPrefix) + std::string(name));
}

StatusOr<CheckpointWriter> CheckpointWriter::begin(Env* env, std::string root, std::string name) {
  TRI_CHECK(is_valid_checkpoint_name(name), "CheckpointWriter: '", name,
            "' is not a valid checkpoint name (non-empty, no '/', not starting with '.')");
  CKPT_RETURN_IF_ERROR(create_dirs(env, root));
  std::string final_dir = join_path(root, name);
  if (exists(env, final_dir)) {
    return Status::invalid("checkpoint '" + final_dir +
                           "' already exists; trident never overwrites a checkpoint (remove it "
                           "or save under another name)");
  }
  std::string staging = staging_dir_for(root, name);
  if (exists(env, staging)) CKPT_RETURN_IF_ERROR(remove_tree(env, staging));
  CKPT_RETURN_IF_ERROR(env->create_dir(staging));
  return CheckpointWriter(env, std::move(root), std::move(staging), std::move(final_dir),
                          std::move(name));
}

void CheckpointWriter::check_new_file_name(const std::string& name) const {
  TRI_CHECK(active_, "CheckpointWriter: adding '", name, "' after commit");
  TRI_CHECK(is_valid_checkpoint_file_name(name), "CheckpointWriter: '", name,
            "' is not a valid checkpoint file name (non-empty, no '/', not starting with '.', "
            "not manifest.json or DONE)");
  TRI_CHECK(manifest_.find_file(name) == nullptr, "CheckpointWriter: file '", name,
            "' is written twice in checkpoint '", manifest_.name, "'");
}

Status CheckpointWriter::write_file(const std::string& name, std::string_view contents) {
  check_new_file_name(name);
  CKPT_ASSIGN_OR_RETURN(WrittenFile f,
                        write_file_atomically(env_, join_path(staging_dir_, name), contents));
  manifest_.files.push_back({name, f.size, f.crc32c});
  return Status::ok();
}

Status CheckpointWriter::write_safetensors(const std::string& name,
                                           std::span<const NamedTensor> tensors,
                                           const StringMap& metadata) {
  std::vector<TensorSpec> specs;
  for (const NamedTensor& nt : tensors) specs.push_back({nt.name, nt.tensor.dtype(), nt.tensor.shape()});
  return write_safetensors_streamed(
      name, specs, [&](size_t i) -> StatusOr<Tensor> { return tensors[i].tensor; }, metadata);
}

Status CheckpointWriter::write_safetensors_streamed(const std::string& name, std::span<const TensorSpec> specs,
                                                    const std::function<StatusOr<Tensor>(size_t)>& load,
                                                    const StringMap& metadata) {
  check_new_file_name(name);
  for (const TensorSpec& spec : specs) {
    TRI_CHECK(!manifest_.tensors.contains(spec.name), "CheckpointWriter: tensor '", spec.name,
              "' of file '", name, "' is already in checkpoint '", manifest_.name,
              "'; logical tensor names must be unique across files");
  }
  CKPT_ASSIGN_OR_RETURN(AtomicFileWriter out,
                        AtomicFileWriter::create(env_, join_path(staging_dir_, name)));
  CKPT_RETURN_IF_ERROR(checkpoint::write_safetensors_streamed(out, specs, load, metadata));
  CKPT_RETURN_IF_ERROR(out.commit());
  manifest_.files.push_back({name, out.size(), out.crc32c()});
  for (const TensorSpec& spec : specs)
    add_tensor_shard(spec.name, spec.dtype, spec.shape, TensorShard::whole(name, spec.name, spec.shape));
  return Status::ok();
}

void CheckpointWriter::add_file(ManifestFile file) {
  check_new_file_name(file.name);
  manifest_.files.push_back(std::move(file));
}

void CheckpointWriter::add_tensor_shard(const std::string& name, DType dtype, const Shape& shape,
                                        TensorShard shard) {
  TRI_CHECK(active_, "CheckpointWriter: adding tensor '", name, "' after commit");
  auto [it, inserted] = manifest_.tensors.try_emplace(name);
  if (inserted) {
    it->second.dtype = dtype;
    it->second.shape = shape;
  }
  TRI_CHECK(it->second.dtype == dtype && it->second.shape == shape, "CheckpointWriter: tensor '",
            name, "' was declared ", dtype_name(it->second.dtype), " ", it->second.shape,
            " and now ", dtype_name(dtype), " ", shape);
  it->second.shards.push_back(std::move(shard));
}

void CheckpointWriter::set_metadata(std::string key, std::string value) {
  manifest_.metadata[std::move(key)] = std::move(value);
}

StatusOr<std::string> CheckpointWriter::commit() {
  TRI_CHECK(active_, "CheckpointWriter: commit of checkpoint '", manifest_.name, "' twice");
  const std::string where = "checkpoint '" + final_dir_ + "'";
  CKPT_RETURN_IF_ERROR(validate_manifest(manifest_, where));
  // Files other ranks wrote must be in place, and the index must match the files, before the
  // manifest vouches for them.
  for (const ManifestFile& f : manifest_.files) {
    CKPT_RETURN_IF_ERROR(verify_file(env_, staging_dir_, f, /*checksum=*/false, where));
  }
  CKPT_RETURN_IF_ERROR(check_index(
      manifest_,
      [&](const std::string& name) -> StatusOr<std::shared_ptr<const SafetensorsReader>> {
        CKPT_ASSIGN_OR_RETURN(SafetensorsReader reader,
                              SafetensorsReader::open(env_, join_path(staging_dir_, name)));
        return std::make_shared<const SafetensorsReader>(std::move(reader));
      },
      where));
  CKPT_ASSIGN_OR_RETURN(WrittenFile manifest,
                        write_file_atomically(env_, join_path(staging_dir_, kManifestFileName),
                                              manifest_to_json(manifest_)));
  CKPT_RETURN_IF_ERROR(write_file_atomically(env_, join_path(staging_dir_, kDoneFileName),
                                             done_json(manifest.size, manifest.crc32c))
                           .status());
  if (exists(env_, final_dir_)) {
    return Status::invalid(where + " appeared while it was being written; not overwriting it");
  }
  CKPT_RETURN_IF_ERROR(env_->rename(staging_dir_, final_dir_));
  active_ = false;  // the staging directory is gone: nothing to clean up any more
  CKPT_RETURN_IF_ERROR(env_->sync_dir(root_));
  return final_dir_;
}

// ---- CheckpointReader ----

StatusOr<CheckpointReader> CheckpointReader::open(Env* env, std::string dir,
                                                  CheckpointReadOptions options) {
  const std::string where = "checkpoint '" + dir + "'";
  if (!is_directory(env, dir)) {
    return Status::invalid(where + " does not exist or is not a directory");
  }
  CheckpointReader r;
  r.env_ = env;
  r.mutex_ = std::make_unique<std::mutex>();
  CKPT_ASSIGN_OR_RETURN(r.manifest_, read_manifest(env, dir, where));
  r.dir_ = std::move(dir);
  // Sizes first (cheap, and the likely failure after a crash), then the full reads.
  for (const ManifestFile& f : r.manifest_.files)
    CKPT_RETURN_IF_ERROR(verify_file(env, r.dir_, f, /*checksum=*/false, where));
  if (options.verify_checksums) {
    for (const ManifestFile& f : r.manifest_.files)
      CKPT_RETURN_IF_ERROR(verify_file(env, r.dir_, f, /*checksum=*/true, where));
  }
  const CheckpointReader& reader = r;
  CKPT_RETURN_IF_ERROR(check_index(
      r.manifest_, [&](const std::string& name) { return reader.safetensors(name); }, where));
  return r;
}

StatusOr<std::string> CheckpointReader::read_file(const std::string& name) const {
  const ManifestFile* f = manifest_.find_file(name);
  if (f == nullptr) {
    return Status::invalid("checkpoint '" + dir_ + "' has no file '" + name + "'");
  }
  CKPT_ASSIGN_OR_RETURN(std::string data, checkpoint::read_file(env_, join_path(dir_, name)));
  if (data.size() != f->size || core::crc32c(data) != f->crc32c) {
    return Status::invalid("checkpoint '" + dir_ + "': file '" + name +
                           "' changed since the checkpoint was opened (size or CRC-32C differ "
                           "from the manifest)");
  }
  return data;
}

StatusOr<std::shared_ptr<const SafetensorsReader>> CheckpointReader::safetensors(
    const std::string& name) const {
  std::lock_guard<std::mutex> lock(*mutex_);
  auto it = open_files_.find(name);
  if (it != open_files_.end()) return it->second;
  if (manifest_.find_file(name) == nullptr) {
    return Status::invalid("checkpoint '" + dir_ + "' has no file '" + name + "'");
  }
  CKPT_ASSIGN_OR_RETURN(SafetensorsReader reader,
                        SafetensorsReader::open(env_, join_path(dir_, name)));
  auto shared = std::make_shared<const SafetensorsReader>(std::move(reader));
  open_files_.emplace(name, shared);
  return shared;
}

StatusOr<Tensor> CheckpointReader::load_tensor(std::string_view name) const {
  auto it = manifest_.tensors.find(name);
  if (it == manifest_.tensors.end()) {
    return Status::invalid("checkpoint '" + dir_ + "' has no tensor '" + std::string(name) + "'");
  }
  const ManifestTensor& t = it->second;
  if (t.shards.size() == 1 && t.shards[0].covers_whole(t.shape)) {
    CKPT_ASSIGN_OR_RETURN(std::shared_ptr<const SafetensorsReader> file,
                          safetensors(t.shards[0].file));
    CKPT_ASSIGN_OR_RETURN(Tensor whole, file->load(t.shards[0].key));
    return views::view(whole, t.shape.span());  // a flat shard is stored 1-D
  }
  Tensor out = empty(t.shape, t.dtype);
  const Tensor out_flat = views::view(out, {t.shape.product()});
  for (const TensorShard& s : t.shards) {
    CKPT_ASSIGN_OR_RETURN(std::shared_ptr<const SafetensorsReader> file, safetensors(s.file));
    CKPT_ASSIGN_OR_RETURN(Tensor part, file->load(s.key));
    if (s.kind == TensorShard::Kind::kFlat) {
      core::copy_(views::narrow(out_flat, 0, s.flat_begin, s.flat_end - s.flat_begin), part);
      continue;
    }
    Tensor dst = out;
    for (int d = 0; d < t.shape.size(); ++d) dst = views::narrow(dst, d, s.offsets[d], s.shape[d]);
    core::copy_(dst, part);
  }
  return out;
}

StatusOr<Tensor> CheckpointReader::load_flat_range(std::string_view name, int64_t begin,
                                                   int64_t end) const {
  auto it = manifest_.tensors.find(name);
  if (it == manifest_.tensors.end()) {
    return Status::invalid("checkpoint '" + dir_ + "' has no tensor '" + std::string(name) + "'");
  }
  const ManifestTensor& t = it->second;
  TRI_CHECK_INDEX(0 <= begin && begin <= end && end <= t.shape.product(), "load_flat_range: [",
                  begin, ", ", end, ") is not a range of tensor '", name, "' ", t.shape, " (",
                  t.shape.product(), " elements)");
  const bool whole = t.shards.size() == 1 && t.shards[0].covers_whole(t.shape);
  if (whole || t.shards[0].kind == TensorShard::Kind::kFlat) {
    Tensor out = empty(Shape{end - begin}, t.dtype);
    for (const TensorShard& s : t.shards) {
      const int64_t shard_begin = whole ? 0 : s.flat_begin;
      const int64_t shard_end = whole ? t.shape.product() : s.flat_end;
      const int64_t lo = std::max(begin, shard_begin), hi = std::min(end, shard_end);
      if (lo >= hi) continue;
      CKPT_ASSIGN_OR_RETURN(std::shared_ptr<const SafetensorsReader> file, safetensors(s.file));
      CKPT_ASSIGN_OR_RETURN(Tensor part, file->load_elements(s.key, lo - shard_begin, hi - lo));
      core::copy_(views::narrow(out, 0, lo - begin, hi - lo), part);
    }
    return out;
  }
  CKPT_ASSIGN_OR_RETURN(Tensor full, load_tensor(name));
  return core::clone(views::narrow(views::view(full, {t.shape.product()}), 0, begin, end - begin));
}

// ---- listing and pruning ----

std::string step_checkpoint_name(int64_t step) {
  TRI_CHECK(step >= 0, "step_checkpoint_name: step ", step, " is negative");
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step_%06lld", static_cast<long long>(step));
  return buf;
}

std::optional<int64_t> parse_step_checkpoint_name(std::string_view name) {
  constexpr std::string_view kPrefix = "step_";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  const std::string_view digits = name.substr(kPrefix.size());
  if (digits.size() < 6 || digits.size() > 18) return std::nullopt;
  int64_t step = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    step = step * 10 + (c - '0');
  }
  // Only the canonical spelling, so that two directories never claim one step.
  if (step_checkpoint_name(step) != name) return std::nullopt;
  return step;
}

StatusOr<std::vector<CheckpointListing>> list_step_checkpoints(Env* env, const std::string& root) {
  std::vector<CheckpointListing> out;
  if (!exists(env, root)) return out;
  CKPT_ASSIGN_OR_RETURN(std::vector<std::string> names, env->list_dir(root));
  for (const std::string& name : names) {
    const auto step = parse_step_checkpoint_name(name);
    const std::string dir = join_path(root, name);
    if (!step || !is_directory(env, dir)) continue;
    out.push_back({name, *step, exists(env, join_path(dir, kDoneFileName))});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return out;
}

StatusOr<std::optional<std::string>> find_latest_checkpoint(Env* env, const std::string& root) {
  CKPT_ASSIGN_OR_RETURN(std::vector<CheckpointListing> all, list_step_checkpoints(env, root));
  for (auto it = all.rbegin(); it != all.rend(); ++it)
    if (it->complete) return std::optional<std::string>(join_path(root, it->name));
  return std::optional<std::string>();
}

StatusOr<std::vector<std::string>> incomplete_after_latest(Env* env, const std::string& root) {
  CKPT_ASSIGN_OR_RETURN(std::vector<CheckpointListing> all, list_step_checkpoints(env, root));
  std::vector<std::string> names;
  for (auto it = all.rbegin(); it != all.rend() && !it->complete; ++it) names.insert(names.begin(), it->name);
  return names;
}

Status prune_checkpoints(Env* env, const std::string& root, int keep_last) {
  TRI_CHECK(keep_last >= 1, "prune_checkpoints: keep_last is ", keep_last, "; it must be >= 1");
  CKPT_ASSIGN_OR_RETURN(std::vector<CheckpointListing> all, list_step_checkpoints(env, root));
  std::vector<std::string> complete;
  for (const CheckpointListing& c : all)
    if (c.complete) complete.push_back(c.name);
  const size_t remove_count = complete.size() > static_cast<size_t>(keep_last)
                                  ? complete.size() - static_cast<size_t>(keep_last)
                                  : 0;
  for (size_t i = 0; i < remove_count; ++i) {
    const std::string scratch = join_path(root, kDeletingPrefix + complete[i]);
    if (exists(env, scratch)) CKPT_RETURN_IF_ERROR(remove_tree(env, scratch));
    CKPT_RETURN_IF_ERROR(env->rename(join_path(root, complete[i]), scratch));
    CKPT_RETURN_IF_ERROR(env->sync_dir(root));
    CKPT_RETURN_IF_ERROR(remove_tree(env, scratch));
  }
  if (!exists(env, root)) return Status::ok();
  CKPT_ASSIGN_OR_RETURN(std::vector<std::string> names, env->list_dir(root));
  for (const std::string& name : names) {
    if (name.starts_with(kStagingPrefix) || name.starts_with(kDeletingPrefix)) {
      CKPT_RETURN_IF_ERROR(remove_tree(env, join_path(root, name)));
    }
  }
  return env->sync_dir(root);
}

}  // namespace trident::checkpoint
