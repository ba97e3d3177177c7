#include "models/gpt2/family.h"

#include "models/gpt2/gemm_shapes.h"
#include "models/gpt2/model.h"

namespace trident::models::gpt2 {

ModelFamily family() {
  ModelFamily f;
  f.arch = "gpt2";
  f.doc = "GPT-2: learned positions, LayerNorm, GELU MLP, tied head (Hugging Face GPT2LMHeadModel)";
  OptionField eps{"layer_norm_eps", "LayerNorm epsilon", OptionType::kFloat, Range::positive(), {}, {}, nullptr, nullptr};
  f.keys.push_back({std::move(eps), OptionValue(1e-5)});
  f.validate = [](const ModelConfig& cfg) { GPT2Config::from(cfg).validate(); };
  f.build = [](const ModelConfig& cfg) -> std::unique_ptr<CausalLM> {
    return std::make_unique<GPT2>(GPT2Config::from(cfg));
  };
  f.gemm_shapes = [](const ModelConfig& cfg, int64_t B, int64_t T) {
    return gemm_shapes(GPT2Config::from(cfg), B, T);
  };
  return f;
}

}  // namespace trident::models::gpt2
