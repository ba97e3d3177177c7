#include "adapters/peft_files.h"

#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "autograd/grad_mode.h"
#include "checkpoint/atomic_file.h"
#include "checkpoint/env.h"
#include "checkpoint/strict_json.h"
#include "nn/freeze.h"
#include "core/copy.h"
#include "models/registry.h"

namespace trident::adapters {
namespace {

constexpr const char* kPeftPrefix = "base_model.model.";

std::string number_str(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

std::string peft_tensor_name(const models::ModelConfig& cfg, const std::string& name) {
  const std::string layer = lora_layer_path(name);
  return kPeftPrefix + hf_module_path(cfg, layer) + name.substr(layer.size());
}

std::string peft_config_json(const models::ModelConfig& cfg, const LoraOptions& options,
                             const std::vector<LoraLayerInfo>& layers, const std::string& base_model) {
  const std::vector<std::string> items = options.targets();
  nlohmann::ordered_json targets;
  bool globs = false;
  for (const std::string& item : items) globs = globs || nn::is_glob(item);
  if (items.size() == 1 && items[0] == "all-linear") {
    targets = "all-linear";
  } else if (globs) {  // PEFT matches names, not globs: list the layers themselves
    targets = nlohmann::ordered_json::array();
    for (const LoraLayerInfo& l : layers) targets.push_back(hf_module_path(cfg, l.path));
  } else {
    targets = items;
  }
  bool in_out = !layers.empty();
  for (const LoraLayerInfo& l : layers) in_out = in_out && l.in_out;
  // PEFT's LoraConfig, its fields in its order (peft 0.13), with the values trident implements.
  nlohmann::ordered_json j = {
      {"alpha_pattern", nlohmann::ordered_json::object()},
      {"auto_mapping", nullptr},
      {"base_model_name_or_path", base_model.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(base_model)},
      {"bias", "none"},
      {"fan_in_fan_out", in_out},
      {"inference_mode", true},
      {"init_lora_weights", true},
      {"layer_replication", nullptr},
      {"layers_pattern", nullptr},
      {"layers_to_transform", nullptr},
      {"loftq_config", nlohmann::ordered_json::object()},
      {"lora_alpha", options.alpha},
      {"lora_dropout", options.dropout},
      {"megatron_config", nullptr},
      {"megatron_core", "megatron.core"},
      {"modules_to_save", nullptr},
      {"peft_type", "LORA"},
      {"r", options.r},
      {"rank_pattern", nlohmann::ordered_json::object()},
      {"revision", nullptr},
      {"target_modules", targets},
      {"task_type", "CAUSAL_LM"},
      {"use_dora", false},
      {"use_rslora", options.use_rslora},
  };
  // lora_alpha is an int in PEFT's files when it is one.
  if (options.alpha == std::floor(options.alpha) && std::fabs(options.alpha) < 1e15)
    j["lora_alpha"] = static_cast<int64_t>(options.alpha);
  return j.dump(2) + "\n";
}

Status write_peft_adapter(const std::string& dir, const models::ModelConfig& cfg, const std::string& config_json,
                          std::span<const checkpoint::NamedTensor> tensors) {
  checkpoint::Env* env = checkpoint::default_env();
  if (Status s = checkpoint::create_dirs(env, dir); !s.is_ok()) return s;
  std::vector<checkpoint::NamedTensor> renamed;
  for (const checkpoint::NamedTensor& t : tensors) {
    if (!is_lora_parameter(t.name)) return Status::invalid("write_peft_adapter: '" + t.name + "' is not an adapter parameter");
    renamed.push_back({peft_tensor_name(cfg, t.name), t.tensor});
  }
  // The weights first: a config beside weights that are not there yet would be read as an
  // adapter; weights without a config are not an adapter (PEFT refuses the directory).
  Status s = checkpoint::save_safetensors(env, checkpoint::join_path(dir, kPeftWeightsFile), renamed, {{"format", "pt"}});
  if (!s.is_ok()) return s;
  auto written = checkpoint::write_file_atomically(env, checkpoint::join_path(dir, kPeftConfigFile), config_json);
  return written.is_ok() ? Status::ok() : written.status();
}

StatusOr<PeftAdapter> read_peft_adapter(const std::string& dir) {
  checkpoint::Env* env = checkpoint::default_env();
  const std::string config_path = checkpoint::join_path(dir, kPeftConfigFile);
  auto text = checkpoint::read_file(env, config_path);
  if (!text.is_ok())
    return Status::invalid("adapter directory '" + dir + "': cannot read " + kPeftConfigFile + " (" +
                           text.status().message() + "); a PEFT adapter directory holds " + kPeftConfigFile + " and " +
                           kPeftWeightsFile);
  auto parsed = checkpoint::parse_json_strict(text.value(), config_path);
  if (!parsed.is_ok()) return parsed.status();
  const nlohmann::json& j = parsed.value();
  auto bad = [&](const std::string& field, const std::string& why) {
    return Status::invalid(config_path + ": \"" + field + "\" " + why);
  };
  if (!j.is_object()) return Status::invalid(config_path + ": not a JSON object");
  PeftAdapter a;
  a.dir = dir;
  if (!j.contains("peft_type") || !j["peft_type"].is_string())
    return bad("peft_type", "is missing: a LoRA adapter's is \"LORA\"");
  if (j["peft_type"] != "LORA")
    return bad("peft_type", "is " + j["peft_type"].dump() + ": trident reads LoRA adapters (\"LORA\") only");
  if (j.contains("task_type") && !j["task_type"].is_null() && j["task_type"] != "CAUSAL_LM")
    return bad("task_type", "is " + j["task_type"].dump() + ": trident's models are causal LMs (\"CAUSAL_LM\")");
  if (!j.contains("r") || !j["r"].is_number_integer() || j["r"].get<int64_t>() < 1 || j["r"].get<int64_t>() > 65536)
    return bad("r", j.contains("r") ? "is " + j["r"].dump() + ": the rank must be an integer in [1, 65536]" : "is missing");
  a.options.r = j["r"].get<int64_t>();
  if (!j.contains("lora_alpha") || !j["lora_alpha"].is_number() || !(j["lora_alpha"].get<double>() > 0))
    return bad("lora_alpha", j.contains("lora_alpha") ? "is " + j["lora_alpha"].dump() + ": it must be a number > 0"
                                                      : "is missing");
  a.options.alpha = j["lora_alpha"].get<double>();
  if (j.contains("lora_dropout")) {
    const auto& d = j["lora_dropout"];
    if (!d.is_number() || d.get<double>() < 0 || d.get<double>() >= 1)
      return bad("lora_dropout", "is " + d.dump() + ": it must be a number in [0, 1)");
    a.options.dropout = d.get<double>();
  }
  if (j.contains("use_rslora") && !j["use_rslora"].is_null()) {
    if (!j["use_rslora"].is_boolean()) return bad("use_rslora", "is " + j["use_rslora"].dump() + ": true or false");
    a.options.use_rslora = j["use_rslora"].get<bool>();
  }
  // What PEFT can express and trident does not train: refused, never ignored.
  if (j.contains("use_dora") && j["use_dora"] == true) return bad("use_dora", "is true: trident does not implement DoRA");
  if (j.contains("bias") && !j["bias"].is_null() && j["bias"] != "none")
    return bad("bias", "is " + j["bias"].dump() + ": trident's adapters train no biases (\"none\")");
  for (const char* field : {"modules_to_save", "layers_to_transform", "layers_pattern", "layer_replication"})
    if (j.contains(field) && !j[field].is_null() && !(j[field].is_array() && j[field].empty()))
      return bad(field, "is " + j[field].dump() + ": trident does not implement it (null expected)");
  for (const char* field : {"rank_pattern", "alpha_pattern"})
    if (j.contains(field) && !j[field].is_null() && !(j[field].is_object() && j[field].empty()))
      return bad(field, "is " + j[field].dump() + ": trident gives every layer the same r and alpha ({} expected)");
  if (!j.contains("target_modules")) return bad("target_modules", "is missing");
  const auto& t = j["target_modules"];
  if (t.is_string()) {
    if (t == "all-linear") a.targets.items = {"all-linear"};
    else a.targets.regex = t.get<std::string>();
  } else if (t.is_array() && !t.empty()) {
    for (const auto& item : t) {
      if (!item.is_string() || item.get<std::string>().empty())
        return bad("target_modules", "has " + item.dump() + ": module names are non-empty strings");
      a.targets.items.push_back(item.get<std::string>());
    }
  } else {
    return bad("target_modules", "is " + t.dump() + ": a list of module names or one regular expression");
  }
  if (j.contains("base_model_name_or_path") && j["base_model_name_or_path"].is_string())
    a.base_model = j["base_model_name_or_path"].get<std::string>();

  const std::string weights = checkpoint::join_path(dir, kPeftWeightsFile);
  auto tensors = checkpoint::load_safetensors(env, weights);
  if (!tensors.is_ok()) return tensors.status();
  for (checkpoint::NamedTensor& nt : tensors.value()) {
    if (!is_floating(nt.tensor.dtype()))
      return Status::invalid(weights + ": tensor '" + nt.name + "' has dtype " + dtype_name(nt.tensor.dtype()) +
                             ": adapter weights are floating point");
    a.tensors.push_back(std::move(nt));
  }
  return a;
}

StatusOr<LoraOptions> lora_options_for(const PeftAdapter& adapter, const LoraOptions& configured) {
  LoraOptions o = adapter.options;
  const std::string where = "train.init_adapter '" + adapter.dir + "'";
  if (configured.enabled()) {
    if (configured.r != o.r || configured.alpha != o.alpha || configured.use_rslora != o.use_rslora)
      return Status::invalid(where + " has r = " + std::to_string(o.r) + ", lora_alpha = " + number_str(o.alpha) +
                             ", use_rslora = " + (o.use_rslora ? "true" : "false") + "; the config's [lora] says r = " +
                             std::to_string(configured.r) + ", alpha = " + number_str(configured.alpha) +
                             ", use_rslora = " + (configured.use_rslora ? "true" : "false") +
                             ": make them agree, or leave lora.r = 0 to take the adapter's");
    o.dropout = configured.dropout;
    o.init_seed = configured.init_seed;
  }
  o.target_modules = adapter.targets.regex ? "" : configured.target_modules;
  if (!adapter.targets.regex) {
    o.target_modules.clear();
    for (const std::string& item : adapter.targets.items) o.target_modules += (o.target_modules.empty() ? "" : ",") + item;
  }
  return o;
}

Status load_peft_weights(models::CausalLM& model, const PeftAdapter& adapter) {
  const models::ModelConfig& cfg = model.model_config();
  std::map<std::string, std::pair<std::string, Tensor>> by_peft_name;  // PEFT name -> (trident name, parameter)
  for (const auto& [name, p] : model.named_parameters())
    if (is_lora_parameter(name)) by_peft_name.emplace(peft_tensor_name(cfg, name), std::make_pair(name, p));
  const std::string file = checkpoint::join_path(adapter.dir, kPeftWeightsFile);
  std::set<std::string> loaded;
  autograd::NoGradGuard no_grad;
  for (const checkpoint::NamedTensor& t : adapter.tensors) {
    // PEFT keeps the adapter's name in memory ("lora_A.default.weight") and drops it on save;
    // a file saved with it is read as well.
    std::string name = t.name;
    for (const char* ab : {".lora_A.", ".lora_B."})
      if (const size_t at = name.find(ab); at != std::string::npos && name.find(".default.", at) == at + 7)
        name.erase(at + 7, 8);
    const auto it = by_peft_name.find(name);
    if (it == by_peft_name.end()) {
      std::string some;
      for (const auto& [n, p] : by_peft_name) {
        some = n;
        break;
      }
      return Status::invalid(file + ": tensor '" + t.name + "' is not an adapter of this model (model.arch = \"" +
                             cfg.arch + "\", target_modules " + adapter.targets.str() + "; its adapters are named like '" +
                             some + "')");
    }
    const Tensor& dst = it->second.second;
    if (!(t.tensor.shape() == dst.shape()))
      return Status::invalid(file + ": tensor '" + t.name + "' has shape " + t.tensor.shape().str() + "; the model's " +
                             it->second.first + " has " + dst.shape().str() + " (r = " + std::to_string(adapter.options.r) +
                             ")");
    if (!loaded.insert(name).second) return Status::invalid(file + ": tensor '" + t.name + "' appears twice");
    core::copy_(dst, core::cast(t.tensor, dst.dtype()));
  }
  std::string missing;
  for (const auto& [peft, p] : by_peft_name)
    if (!loaded.contains(peft)) missing += (missing.empty() ? "" : ", ") + peft;
  if (!missing.empty()) return Status::invalid(file + ": missing adapter tensors: " + missing);
  return Status::ok();
}

}  // namespace trident::adapters
