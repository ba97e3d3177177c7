#include "models/llama/family.h"

#include "models/llama/model.h"

namespace trident::models::llama {
namespace {

FamilyKey key(std::string name, std::string doc, OptionType type, OptionValue value, Range range = {}) {
  return {OptionField{std::move(name), std::move(doc), type, range, {}, {}, nullptr, nullptr}, std::move(value)};
}

}  // namespace

ModelFamily family() {
  ModelFamily f;
  f.arch = "llama";
  f.doc = "LLaMA: RMSNorm, RoPE, grouped-query attention, SwiGLU (Hugging Face LlamaForCausalLM; Mistral and "
          "Qwen2 by config)";
  f.keys = {
      key("n_kv_heads", "key/value heads, dividing n_head (grouped-query attention); 0: n_head", OptionType::kInt,
          int64_t{0}, Range::non_negative()),
      key("intermediate_size", "the SwiGLU MLP's hidden width; 0: 8/3 n_embd rounded up to a multiple of 256",
          OptionType::kInt, int64_t{0}, Range::non_negative()),
      key("rope_theta", "RoPE's base (10000; Llama 3: 500000)", OptionType::kFloat, 10000.0, Range::positive()),
      key("rms_norm_eps", "RMSNorm epsilon", OptionType::kFloat, 1e-6, Range::positive()),
      key("tie_word_embeddings", "the LM head is the token embedding", OptionType::kBool, false),
      key("qkv_bias", "biases on the q, k and v projections (Qwen2)", OptionType::kBool, false),
  };
  f.validate = [](const ModelConfig& cfg) { LlamaConfig::from(cfg).validate(); };
  f.build = [](const ModelConfig& cfg) -> std::unique_ptr<CausalLM> {
    return std::make_unique<Llama>(LlamaConfig::from(cfg));
  };
  f.gemm_shapes = [](const ModelConfig& model, int64_t B, int64_t T) {
    const LlamaConfig c = LlamaConfig::from(model);
    const int64_t C = c.n_embd, KV = c.n_kv_heads * c.head_size(), I = c.intermediate_size, L = c.n_layer;
    std::vector<kernels::cpu::GemmShape> shapes;
    for (const auto& [name, in, out, count] : std::vector<std::tuple<const char*, int64_t, int64_t, int64_t>>{
             {"q_proj", C, C, L}, {"k_proj", C, KV, L}, {"v_proj", C, KV, L}, {"o_proj", C, C, L},
             {"gate_proj", C, I, L}, {"up_proj", C, I, L}, {"down_proj", I, C, L}, {"lm_head", C, c.vocab_size, 1}})
      kernels::cpu::append_linear_gemm_shapes(shapes, name, in, out, count, B * T, /*in_out=*/false);
    return shapes;
  };
  return f;
}

}  // namespace trident::models::llama
