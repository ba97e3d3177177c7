#include "export/hf_writer.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "checkpoint/atomic_file.h"
#include "checkpoint/env.h"
#include "models/registry.h"
#include "train/hf_model_dir.h"

namespace trident::exporting {
namespace {

constexpr const char* kConfig = train::kHfConfigFile;
constexpr const char* kSingle = train::kHfSingleWeightsFile;
constexpr const char* kIndex = train::kHfWeightIndexFile;

std::string join(const std::string& dir, const std::string& name) { return dir + "/" + name; }

Status write_text(const std::string& path, const std::string& text) {
  auto written = checkpoint::write_file_atomically(checkpoint::default_env(), path, text);
  return written.is_ok() ? Status::ok() : written.status();
}

}  // namespace

StatusOr<std::vector<std::string>> write_hf_model_dir(const std::string& dir, const models::ModelConfig& cfg,
                                                      const std::vector<checkpoint::TensorSpec>& specs,
                                                      const std::function<StatusOr<Tensor>(size_t)>& read,
                                                      int64_t max_shard_bytes) {
  checkpoint::Env* env = checkpoint::default_env();
  if (env->file_type(dir) == checkpoint::FileType::kMissing) {
    if (Status s = checkpoint::create_dirs(env, dir); !s.is_ok()) return s;  // and missing parents, as mkdir -p
  } else if (env->file_type(dir) != checkpoint::FileType::kDirectory) {
    return Status::invalid("export: '" + dir + "' exists and is not a directory");
  }
  const models::ModelFamily& family = models::model_family(cfg.arch);
  // Shards of consecutive tensors, each under the byte limit unless one tensor alone exceeds it.
  std::vector<std::vector<size_t>> shards(1);
  int64_t in_shard = 0, total = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const int64_t bytes = specs[i].shape.product() * static_cast<int64_t>(element_size(specs[i].dtype));
    if (!shards.back().empty() && in_shard + bytes > max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(i);
    in_shard += bytes;
    total += bytes;
  }
  const size_t n = shards.size();
  std::vector<std::string> written;
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  for (size_t k = 0; k < n; ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k + 1, n);
    const std::string file = n == 1 ? kSingle : name;
    std::vector<checkpoint::TensorSpec> named;
    for (size_t i : shards[k]) {
      named.push_back({family.hf_name(cfg, specs[i].name), specs[i].dtype, specs[i].shape});
      weight_map[named.back().name] = file;
    }
    auto out = checkpoint::AtomicFileWriter::create(env, join(dir, file));
    if (!out.is_ok()) return out.status();
    Status s = checkpoint::write_safetensors_streamed(
        out.value(), named, [&](size_t j) { return read(shards[k][j]); }, {{"format", "pt"}});
    if (!s.is_ok() || !(s = out.value().commit()).is_ok()) return s;
    written.push_back(join(dir, file));
  }
  // What an earlier export in the other form left would be read instead (hf_weight_files).
  const std::string stale = join(dir, n > 1 ? kSingle : kIndex);
  if (env->file_type(stale) == checkpoint::FileType::kFile)
    if (Status s = env->remove_file(stale); !s.is_ok()) return s;
  if (n > 1) {
    const nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    if (Status s = write_text(join(dir, kIndex), index.dump(2) + "\n"); !s.is_ok()) return s;
    written.push_back(join(dir, kIndex));
  }
  if (Status s = write_text(join(dir, kConfig), family.to_hf_config(cfg)); !s.is_ok()) return s;
  written.push_back(join(dir, kConfig));
  return written;
}

}  // namespace trident::exporting
