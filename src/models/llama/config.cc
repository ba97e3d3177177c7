#include "models/llama/config.h"

#include "core/check.h"

namespace trident::models::llama {

void LlamaConfig::validate() const {
  check_common_model_keys(n_embd, n_head, activation_checkpointing);
  TRI_CHECK(n_kv_heads >= 1 && n_head % n_kv_heads == 0, "model: n_kv_heads (", n_kv_heads,
            ") must divide n_head (", n_head, "): each key/value head serves a group of query heads");
  TRI_CHECK(head_size() % 2 == 0, "model: the head size n_embd / n_head (", n_embd, " / ", n_head, " = ", head_size(),
            ") must be even for RoPE");
  TRI_CHECK(sliding_window >= 0, "model: sliding_window (", sliding_window,
            ") must be >= 1 keys, or 0 for none");
  TRI_CHECK(intermediate_size >= 1, "model: intermediate_size (", intermediate_size, ") must be at least 1");
  if (num_local_experts > 0) {
    TRI_CHECK(num_experts_per_tok >= 1 && num_experts_per_tok <= num_local_experts, "model: num_experts_per_tok (",
              num_experts_per_tok, ") must be between 1 and num_local_experts (", num_local_experts, ")");
    TRI_CHECK(decoder_sparse_step >= 1 && decoder_sparse_step <= n_layer, "model: decoder_sparse_step (",
              decoder_sparse_step, ") must be between 1 and n_layer (", n_layer, "): layer i is sparse when (i + 1) % step == 0");
  }
  TRI_CHECK(!rope.scaled() || rope.high_freq_factor > rope.low_freq_factor, "model: rope_high_freq_factor (",
            rope.high_freq_factor, ") must exceed rope_low_freq_factor (", rope.low_freq_factor,
            ") for Llama 3's RoPE scaling");
}

LlamaConfig LlamaConfig::from(const ModelConfig& cfg) {
  TRI_CHECK(cfg.arch == "llama", "LLaMA: the config is of model.arch = \"", cfg.arch, "\"");
  TRI_CHECK(cfg.dropout == 0.0, "model.dropout = ", cfg.dropout,
            " with model.arch = \"llama\": LLaMA-family models train without dropout; set model.dropout = 0");
  LlamaConfig c;
  c.n_layer = cfg.n_layer;
  c.n_head = cfg.n_head;
  const int64_t kv = cfg.family_int("n_kv_heads");
  c.n_kv_heads = kv == 0 ? cfg.n_head : kv;
  c.n_embd = cfg.n_embd;
  const int64_t hidden = cfg.family_int("intermediate_size");
  c.intermediate_size = hidden == 0 ? (8 * cfg.n_embd / 3 + 255) / 256 * 256 : hidden;
  c.block_size = cfg.block_size;
  c.vocab_size = cfg.vocab_size;
  c.rope = RopeParams(cfg.family_float("rope_theta"));
  c.rope.factor = cfg.family_float("rope_scaling_factor");
  c.rope.low_freq_factor = cfg.family_float("rope_low_freq_factor");
  c.rope.high_freq_factor = cfg.family_float("rope_high_freq_factor");
  c.rope.original_max_position = cfg.family_int("rope_original_max_position");
  c.rms_norm_eps = cfg.family_float("rms_norm_eps");
  c.tie_word_embeddings = cfg.family_bool("tie_word_embeddings");
  c.qkv_bias = cfg.family_bool("qkv_bias");
  c.sliding_window = cfg.family_int("sliding_window");
  c.init_std = cfg.init_std;
  c.init_seed = cfg.init_seed;
  c.activation_checkpointing = cfg.activation_checkpointing;
  c.num_local_experts = cfg.family_int("num_local_experts");
  c.num_experts_per_tok = cfg.family_int("num_experts_per_tok");
  c.moe_intermediate_size = cfg.family_int("moe_intermediate_size");
  c.shared_expert_intermediate_size = cfg.family_int("shared_expert_intermediate_size");
  c.norm_topk_prob = cfg.family_bool("norm_topk_prob");
  c.decoder_sparse_step = cfg.family_int("decoder_sparse_step");
  c.router_aux_loss_coef = cfg.family_float("router_aux_loss_coef");
  c.router_z_loss_coef = cfg.family_float("router_z_loss_coef");
  c.moe_capacity_factor = cfg.family_float("moe_capacity_factor");
  return c;
}

ModelConfig LlamaConfig::to_model_config() const {
  ModelConfig cfg;
  cfg.arch = "llama";
  cfg.n_layer = n_layer;
  cfg.n_head = n_head;
  cfg.n_embd = n_embd;
  cfg.block_size = block_size;
  cfg.vocab_size = vocab_size;
  cfg.dropout = 0.0;
  cfg.init_std = init_std;
  cfg.init_seed = init_seed;
  cfg.activation_checkpointing = activation_checkpointing;
  cfg.family_values = {{"n_kv_heads", n_kv_heads},
                       {"intermediate_size", intermediate_size},
                       {"rope_theta", rope.theta},
                       {"rope_scaling_factor", rope.factor},
                       {"rope_low_freq_factor", rope.low_freq_factor},
                       {"rope_high_freq_factor", rope.high_freq_factor},
                       {"rope_original_max_position", rope.original_max_position},
                       {"rms_norm_eps", rms_norm_eps},
                       {"tie_word_embeddings", tie_word_embeddings},
                       {"qkv_bias", qkv_bias},
                       {"sliding_window", sliding_window},
                       {"num_local_experts", num_local_experts},
                       {"num_experts_per_tok", num_experts_per_tok},
                       {"moe_intermediate_size", moe_intermediate_size},
                       {"shared_expert_intermediate_size", shared_expert_intermediate_size},
                       {"norm_topk_prob", norm_topk_prob},
                       {"decoder_sparse_step", decoder_sparse_step},
                       {"router_aux_loss_coef", router_aux_loss_coef},
                       {"router_z_loss_coef", router_z_loss_coef},
                       {"moe_capacity_factor", moe_capacity_factor}};
  return cfg;
}

int64_t LlamaConfig::sparse_layers() const {
  int64_t n = 0;
  for (int64_t i = 0; i < n_layer; ++i) n += sparse_layer(i) ? 1 : 0;
  return n;
}

void LlamaConfig::check_tensor_parallel(int64_t tp) const {
  TRI_CHECK(n_head % tp == 0, "tensor parallelism: model.n_head (", n_head, ") must be divisible by parallel.tp (", tp,
            "): each rank computes whole attention heads");
  TRI_CHECK(n_kv_heads % tp == 0 || tp % n_kv_heads == 0, "tensor parallelism: model.n_kv_heads (", n_kv_heads,
            ") and parallel.tp (", tp, ") must divide one another: the ranks split the kv heads, or share each one");
}

}  // namespace trident::models::llama
