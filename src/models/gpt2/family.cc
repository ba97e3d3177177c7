#include "models/gpt2/family.h"

#include <nlohmann/json.hpp>

#include "models/gpt2/gemm_shapes.h"
#include "models/gpt2/hf_names.h"
#include "models/gpt2/model.h"
#include "models/gpt2/shapes.h"

namespace trident::models::gpt2 {
namespace {

// A GPT2Config as the [model] section, refusing what GPT-2 here is not. Each size is checked
// as the [model] key it sets (hf_config_value).
ModelConfig from_hf(const std::string& text, const std::string& where) {
  const nlohmann::json j = nlohmann::json::parse(text);
  auto value = [&](const char* json_key, const char* key) {
    return hf_config_value(j.at(json_key), json_key, "gpt2", key, where);
  };
  auto need = [&](const char* json_key, const char* key) {
    TRI_CHECK(j.contains(json_key) && !j.at(json_key).is_null(), where, ": \"", json_key, "\" (an integer) is missing");
    return std::get<int64_t>(value(json_key, key));
  };
  auto number = [&](const char* json_key, const char* key, double fallback) {
    return j.contains(json_key) && !j.at(json_key).is_null() ? std::get<double>(value(json_key, key)) : fallback;
  };
  TRI_CHECK(j.value("activation_function", std::string("gelu_new")) == "gelu_new", where, ": activation_function \"",
            j.value("activation_function", ""), "\": GPT-2's MLP is tanh-GELU (gelu_new)");
  TRI_CHECK(j.value("tie_word_embeddings", true), where, ": an untied GPT-2 head is not implemented");
  GPT2Config g;
  g.n_layer = need("n_layer", "n_layer");
  g.n_head = need("n_head", "n_head");
  g.n_embd = need("n_embd", "n_embd");
  g.block_size = need("n_positions", "block_size");
  g.vocab_size = need("vocab_size", "vocab_size");
  g.layer_norm_eps = number("layer_norm_epsilon", "layer_norm_eps", 1e-5);
  g.init_std = number("initializer_range", "init_std", 0.02);
  return g.to_model_config();  // model_config_from_hf validates it
}

}  // namespace

ModelFamily family() {
  ModelFamily f;
  f.arch = "gpt2";
  f.doc = "GPT-2: learned positions, LayerNorm, GELU MLP, tied head (Hugging Face GPT2LMHeadModel)";
  OptionField eps{"layer_norm_eps", "LayerNorm epsilon", OptionType::kFloat, Range::positive(), {}, {}, nullptr, nullptr};
  f.keys.push_back({std::move(eps), OptionValue(1e-5)});
  f.validate = [](const ModelConfig& cfg) { GPT2Config::from(cfg).validate(); };
  f.check_tensor_parallel = [](const ModelConfig& cfg, int64_t tp) { GPT2Config::from(cfg).check_tensor_parallel(tp); };
  f.build = [](const ModelConfig& cfg) -> std::unique_ptr<CausalLM> {
    return std::make_unique<GPT2>(GPT2Config::from(cfg));
  };
  f.hf_model_types = {"gpt2"};
  f.from_hf_config = from_hf;
  f.to_hf_config = [](const ModelConfig& cfg) { return hf_config_json(GPT2Config::from(cfg)); };
  f.hf_name = [](const ModelConfig&, const std::string& name) { return name; };  // GPT2Model's names
  f.hf_causal_lm_prefix = "transformer.";  // GPT2LMHeadModel holds GPT2Model as .transformer
  f.linear_weights_in_out = true;          // Conv1D
  f.gemm_shapes = [](const ModelConfig& cfg, int64_t B, int64_t T) {
    return gemm_shapes(GPT2Config::from(cfg), B, T);
  };
  f.shapes = [](const ModelConfig& cfg) { return model_shapes(GPT2Config::from(cfg)); };
  return f;
}

}  // namespace trident::models::gpt2
