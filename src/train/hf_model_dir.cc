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

constexpr const char* kConfig = kHfConfigFile;
constexpr const char* kSingle = kHfSingleWeightsFile;
constexpr const char* kIndex = kHfWeightIndexFile;

StatusOr<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::io_error("cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
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

}  // namespace trident::train
