// The model families trident trains, by name (model.arch): how to build each from its
// config, its own config keys, and what the planner and the MFU need without building it.
// Adding a family: a folder models/<family>/ with its CausalLM (models/causal_lm.h) and a
// `ModelFamily family()`, listed in registry.cc (docs/architecture.md, "Adding a model family").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "kernels/cpu/gemm_rates.h"
#include "models/causal_lm.h"
#include "models/model_config.h"
#include "models/model_shapes.h"

namespace trident::models {

struct ModelFamily {
  std::string arch;  // model.arch
  std::string doc;   // one line: what it is (and which Hugging Face models it reads)
  std::vector<FamilyKey> keys;  // its own [model] keys, beside the common ones
  // The family's own checks of a config (the common ones are done); throws naming keys.
  std::function<void(const ModelConfig&)> validate;
  // Throws, naming the keys, when `tp` tensor-parallel ranks cannot split a model of this
  // config by its plan (GPT-2: n_head divisible by tp). What CausalLM::check_tensor_parallel
  // says of the built model; parallel::check_layout asks it for trainer and planner alike.
  std::function<void(const ModelConfig&, int64_t tp)> check_tensor_parallel;
  // Builds the model, initialized from model.init_seed, on the host.
  std::function<std::unique_ptr<CausalLM>(const ModelConfig&)> build;
  // The GEMMs of one training step on B sequences of T tokens (for the GEMM-rate ceiling and
  // the MFU, kernels/cpu/gemm_rates.h).
  std::function<std::vector<kernels::cpu::GemmShape>(const ModelConfig&, int64_t B, int64_t T)> gemm_shapes;
  // Its parameters and saved activations, without building it (models/model_shapes.h; the planner).
  std::function<ModelShapes(const ModelConfig&)> shapes;

  // Hugging Face, without building the model (models/hf_config.h uses these):
  // the config.json model_types this family reads ("llama", "mistral", "qwen2");
  std::vector<std::string> hf_model_types;
  // a config.json's text -> the [model] section (throws naming `where` and any field it cannot
  // honour, e.g. a rope_scaling it does not implement);
  std::function<ModelConfig(const std::string& config_json, const std::string& where)> from_hf_config;
  // the [model] section -> config.json's text;
  std::function<std::string(const ModelConfig&)> to_hf_config;
  // a parameter's name in a Hugging Face checkpoint ("layers.0.mlp.up_proj.weight" ->
  // "model.layers.0.mlp.up_proj.weight").
  std::function<std::string(const ModelConfig&, const std::string& name)> hf_name;
  // what transformers' *ForCausalLM puts before hf_name in its own module tree
  // (GPT2LMHeadModel: "transformer."; LlamaForCausalLM's are hf_name already): the names
  // PEFT's adapter files use ("base_model.model." + this + hf_name).
  std::string hf_causal_lm_prefix;
  // Its linear layers hold their weights (in, out), Hugging Face's Conv1D (GPT-2), rather than
  // torch.nn.Linear's (out, in): what merging an adapter into a saved weight must know.
  bool linear_weights_in_out = false;
};

// Every family, in a fixed order.
const std::vector<ModelFamily>& model_families();
// The family of `arch`; throws naming it and the families there are.
const ModelFamily& model_family(const std::string& arch);
// model_family(cfg.arch).build(cfg), after cfg.validate().
std::unique_ptr<CausalLM> build_model(const ModelConfig& cfg);
// The [model] section of a Hugging Face config.json (its model_type picks the family), checked
// as a TOML [model] section is (ModelConfig::validate); throws naming `where`, the model_type
// and the ones trident reads, or the field and its value.
ModelConfig model_config_from_hf(const std::string& config_json, const std::string& where);
// config.json's `value` of `json_key` ("n_head", "rope_scaling.factor") read as the [model] key
// `key` of family `arch`, with the checks a TOML value of that key gets (its type and range,
// OptionField::check), so a bad size is refused before it reaches the model; throws naming
// `where`, the JSON key, the value and what is allowed. Floats come back as doubles.
OptionValue hf_config_value(const nlohmann::json& value, const std::string& json_key, const std::string& arch,
                            const std::string& key, const std::string& where);

}  // namespace trident::models
