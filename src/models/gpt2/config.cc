#include "models/gpt2/config.h"

#include "core/check.h"

namespace trident::models::gpt2 {

void GPT2Config::validate() const {
  check_common_model_keys(n_embd, n_head, activation_checkpointing);
}

GPT2Config GPT2Config::from(const ModelConfig& cfg) {
  TRI_CHECK(cfg.arch == "gpt2", "GPT-2: the config is of model.arch = \"", cfg.arch, "\"");
  GPT2Config g;
  g.n_layer = cfg.n_layer;
  g.n_head = cfg.n_head;
  g.n_embd = cfg.n_embd;
  g.block_size = cfg.block_size;
  g.vocab_size = cfg.vocab_size;
  g.dropout = cfg.dropout;
  g.layer_norm_eps = cfg.family_float("layer_norm_eps");
  g.init_std = cfg.init_std;
  g.init_seed = cfg.init_seed;
  g.activation_checkpointing = cfg.activation_checkpointing;
  return g;
}

ModelConfig GPT2Config::to_model_config() const {
  ModelConfig cfg;
  cfg.arch = "gpt2";
  cfg.n_layer = n_layer;
  cfg.n_head = n_head;
  cfg.n_embd = n_embd;
  cfg.block_size = block_size;
  cfg.vocab_size = vocab_size;
  cfg.dropout = dropout;
  cfg.family_values["layer_norm_eps"] = layer_norm_eps;
  cfg.init_std = init_std;
  cfg.init_seed = init_seed;
  cfg.activation_checkpointing = activation_checkpointing;
  return cfg;
}

void GPT2Config::check_tensor_parallel(int64_t tp) const {
  TRI_CHECK(n_head % tp == 0, "tensor parallelism: model.n_head (", n_head, ") must be divisible by parallel.tp (", tp,
            "): each rank computes whole attention heads");
}

}  // namespace trident::models::gpt2
