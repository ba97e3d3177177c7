#include "models/gpt2/hf_names.h"

#include <sstream>

namespace trident::models::gpt2 {

std::optional<std::string> parameter_name_from_hf(std::string_view hf_name) {
  std::string_view name = hf_name;
  if (name.starts_with("transformer.")) name.remove_prefix(std::string_view("transformer.").size());
  if (name == "lm_head.weight") return std::nullopt;  // tied to wte.weight
  if (name.starts_with("h.") && (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias")))
    return std::nullopt;  // causal-mask buffers, not parameters
  return std::string(name);
}

std::string hf_config_json(const GPT2Config& cfg) {
  std::ostringstream os;
  os << "{\n"
     << "  \"model_type\": \"gpt2\",\n"
     << "  \"architectures\": [\"GPT2LMHeadModel\"],\n"
     << "  \"n_layer\": " << cfg.n_layer << ",\n"
     << "  \"n_head\": " << cfg.n_head << ",\n"
     << "  \"n_embd\": " << cfg.n_embd << ",\n"
     << "  \"n_positions\": " << cfg.block_size << ",\n"
     << "  \"n_ctx\": " << cfg.block_size << ",\n"
     << "  \"vocab_size\": " << cfg.vocab_size << ",\n"
     << "  \"layer_norm_epsilon\": " << cfg.layer_norm_eps << ",\n"
     << "  \"activation_function\": \"gelu_new\",\n"
     << "  \"resid_pdrop\": " << cfg.dropout << ",\n"
     << "  \"embd_pdrop\": " << cfg.dropout << ",\n"
     << "  \"attn_pdrop\": 0.0,\n"
     << "  \"initializer_range\": " << cfg.init_std << ",\n"
     << "  \"tie_word_embeddings\": true,\n"
     << "  \"bos_token_id\": 50256,\n"
     << "  \"eos_token_id\": 50256\n"
     << "}\n";
  return os.str();
}

}  // namespace trident::models::gpt2
