#include "models/registry.h"

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "models/gpt2/family.h"
#include "models/llama/family.h"

namespace trident::models {

const std::vector<ModelFamily>& model_families() {
  static const std::vector<ModelFamily> families = {gpt2::family(), llama::family()};
  return families;
}

const ModelFamily& model_family(const std::string& arch) {
  std::string names;
  for (const ModelFamily& f : model_families()) {
    if (f.arch == arch) return f;
    names += (names.empty() ? "" : ", ") + f.arch;
  }
  TRI_CHECK(false, "model.arch = \"", arch, "\" is not a model family; the families are: ", names);
}

ModelConfig model_config_from_hf(const std::string& config_json, const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(config_json);
  } catch (const nlohmann::json::exception& e) {
    TRI_CHECK(false, where, ": not JSON: ", e.what());
  }
  TRI_CHECK(j.is_object() && j.contains("model_type") && j.at("model_type").is_string(), where,
            ": no \"model_type\" string (a Hugging Face config.json names its model type)");
  const std::string type = j.at("model_type").get<std::string>();
  std::string known;
  for (const ModelFamily& f : model_families())
    for (const std::string& t : f.hf_model_types) {
      if (t == type) return f.from_hf_config(config_json, where);
      known += (known.empty() ? "" : ", ") + t;
    }
  TRI_CHECK(false, where, ": model_type \"", type, "\" is not a family trident trains; it reads: ", known);
}

std::unique_ptr<CausalLM> build_model(const ModelConfig& cfg) {
  cfg.validate();
  return model_family(cfg.arch).build(cfg);
}

}  // namespace trident::models
