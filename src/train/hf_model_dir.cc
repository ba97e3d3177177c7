#include "train/hf_model_dir.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "checkpoint/atomic_file.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/env.h"
#include "models/registry.h"

namespace trident::train {
namespace {

constexpr const char* kConfig = "config.json";
constexpr const char* kSingle = "model.safetensors";
constexpr const char* kIndex = "model.safetensors.index.json";

StatusOr<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::io_error("cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Status write_text(const std::string& path, const std::string& text) {
  auto out = checkpoint::AtomicFileWriter::create(checkpoint::default_env(), path);
  if (!out.is_ok()) return out.status();
  if (Status s = out.value().append(text); !s.is_ok()) return s;
  return out.value().commit();
}

std::string join(const std::string& dir, const std::string& name) { return dir + "/" + name; }

// The model.* keys `run` was given (ModelConfig::given_keys) that `dir`'s config.json at `path`
// says otherwise, as an error naming both values; the run's own settings are not compared.
Status check_given_keys(const std::string& path, const models::ModelConfig& hf, const models::ModelConfig& run) {
  auto field_of = [](const models::ModelConfig& c, const std::string& key) -> const OptionField* {
    for (const OptionField& f : c.fields())
      if (f.key == key) return &f;
    return nullptr;
  };
  auto same = [](const OptionValue& a, const OptionValue& b) {
    auto number = [](const OptionValue& v) -> std::optional<double> {
      if (const int64_t* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
      if (const double* d = std::get_if<double>(&v)) return *d;
      return std::nullopt;
    };
    return number(a) && number(b) ? *number(a) == *number(b) : a == b;
  };
  std::vector<std::string> keys(run.given_keys.begin(), run.given_keys.end());
  // arch first: with another family, that is the difference to name.
  std::stable_partition(keys.begin(), keys.end(),
                        [](const std::string& k) { return k == models::ModelConfig::kSelectorKey; });
  for (const std::string& key : keys) {
    if (key == "dropout" || key == "init_seed" || key == "activation_checkpointing") continue;  // the run's
    const OptionField* given = field_of(run, key);
    if (given == nullptr) continue;  // not a key of run's family (ModelConfig::validate names it)
    const OptionValue value = given->get(&run);
    // 0 in a TOML config means "derive it" (n_kv_heads: n_head, intermediate_size: the family's
    // width); config.json states the derived number, so a given 0 says nothing to compare.
    if ((key == "n_kv_heads" || key == "intermediate_size") && value == OptionValue(int64_t{0})) continue;
    const std::string was = "model." + key + " = " + option_value_str(value) + " is given, but " + path;
    const std::string fix = "; train.init_from takes the architecture from the directory: leave model." + key +
                            " out, or make it agree";
    const OptionField* own = field_of(hf, key);
    if (own == nullptr)
      return Status::invalid(was + " describes a model.arch = \"" + hf.arch + "\", which has no such key" + fix);
    if (!same(value, own->get(&hf)))
      return Status::invalid(was + " gives model." + key + " = " + option_value_str(own->get(&hf)) + fix);
  }
  return Status::ok();
}

}  // namespace

bool is_hf_model_dir(const std::string& path) {
  checkpoint::Env* env = checkpoint::default_env();
  return !path.empty() && env->file_type(path) == checkpoint::FileType::kDirectory &&
         env->file_type(join(path, kConfig)) == checkpoint::FileType::kFile &&
         env->file_type(join(path, checkpoint::kDoneFileName)) == checkpoint::FileType::kMissing &&
         // a checkpoint whose write was cut short (a manifest, no DONE) is not a model directory
         env->file_type(join(path, checkpoint::kManifestFileName)) == checkpoint::FileType::kMissing;
}

StatusOr<models::ModelConfig> hf_model_config(const std::string& dir, const models::ModelConfig& run) {
  const std::string path = join(dir, kConfig);
  auto text = read_text(path);
  if (!text.is_ok()) return text.status();
  models::ModelConfig cfg;
  try {
    cfg = models::model_config_from_hf(text.value(), path);
  } catch (const Error& e) {
    return Status::invalid(e.message());
  } catch (const nlohmann::json::exception& e) {
    return Status::invalid(path + ": " + e.what());
  }
  if (Status s = check_given_keys(path, cfg, run); !s.is_ok()) return s;
  cfg.dropout = run.dropout;
  cfg.init_seed = run.init_seed;
  cfg.activation_checkpointing = run.activation_checkpointing;
  return cfg;
}

Status resolve_init_from(TrainConfig& cfg) {
  if (!is_hf_model_dir(cfg.train.init_from)) return Status::ok();
  auto model = hf_model_config(cfg.train.init_from, cfg.model);
  if (!model.is_ok()) return model.status();
  cfg.model = model.value();
  return Status::ok();
}

StatusOr<std::vector<std::string>> hf_weight_files(const std::string& path) {
  checkpoint::Env* env = checkpoint::default_env();
  if (env->file_type(path) != checkpoint::FileType::kDirectory) return std::vector<std::string>{path};
  if (env->file_type(join(path, kSingle)) == checkpoint::FileType::kFile)
    return std::vector<std::string>{join(path, kSingle)};
  const std::string index_path = join(path, kIndex);
  if (env->file_type(index_path) != checkpoint::FileType::kFile)
    return Status::invalid(path + ": a model directory holds " + kSingle + " or " + kIndex + "; it has neither");
  auto text = read_text(index_path);
  if (!text.is_ok()) return text.status();
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(text.value());
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range.406 for a number past a double (1e999)
    return Status::invalid(index_path + ": not JSON: " + e.what());
  }
  if (!index.is_object() || !index.contains("weight_map") || !index.at("weight_map").is_object())
    return Status::invalid(index_path + ": no \"weight_map\" object {tensor name: shard file}, as save_pretrained "
                           "writes it");
  // The shard files the index names, each of which must exist. Which tensors each holds is
  // load_hf_weights' to check, by parameter (transformers also treats the map as a guide only:
  // real indexes list buffers such as rotary_emb.inv_freq, or were re-sharded by hand).
  std::vector<std::string> files;
  std::map<std::string, std::set<std::string>> placed;
  for (const auto& [tensor, file] : index.at("weight_map").items()) {
    if (!file.is_string())
      return Status::invalid(index_path + ": weight_map gives '" + tensor + "' the shard " + file.dump() +
                             ", which is not a file name (a string)");
    const std::string name = file.get<std::string>();
    if (name.find('/') != std::string::npos || name.starts_with("."))
      return Status::invalid(index_path + ": weight_map names file '" + name + "' for '" + tensor +
                             "': shards must be files of the directory");
    if (!placed.contains(name)) files.push_back(join(path, name));
    placed[name].insert(tensor);
  }
  if (files.empty()) return Status::invalid(index_path + ": weight_map names no file");
  for (const auto& [name, tensors] : placed)
    if (env->file_type(join(path, name)) != checkpoint::FileType::kFile)
      return Status::invalid(index_path + ": weight_map places '" + *tensors.begin() + "' in '" + name +
                             "', which is not a file of " + path);
  return files;
}

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

}  // namespace trident::train
