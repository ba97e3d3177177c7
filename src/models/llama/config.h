// The LLaMA family's shape (Llama 2/3, Mistral, Qwen2 by config): in a training config it is
// the [model] section with arch = "llama" (models/model_config.h): the common keys (n_layer,
// n_head, n_embd, block_size, vocab_size, init_std, init_seed, activation_checkpointing) and
// the family's own below, named as Hugging Face's LlamaConfig names them where it can.
#pragma once

#include <cstdint>
#include <string>

#include "core/rope_params.h"
#include "models/model_config.h"

namespace trident::models::llama {

struct LlamaConfig {
  int64_t n_layer = 2;
  int64_t n_head = 4;
  int64_t n_kv_heads = 4;          // key/value heads (grouped-query attention); divides n_head
  int64_t n_embd = 64;
  int64_t intermediate_size = 176; // the SwiGLU MLP's hidden width
  int64_t block_size = 128;        // the longest sequence (max_position_embeddings)
  int64_t vocab_size = 256;
  // RoPE's base (500000 for Llama 3) and Llama 3's frequency scaling (factor 0: none).
  RopeParams rope = RopeParams(10000.0);
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;  // the LM head is the token embedding (Llama 3.2 1B/3B, Qwen2 0.5B)
  bool qkv_bias = false;           // biases on q, k and v (Qwen2)
  int64_t sliding_window = 0;      // Mistral's: each query sees the last sliding_window keys; 0: all
  double init_std = 0.02;          // N(0, init_std) for every matrix (Hugging Face's initializer_range)
  int64_t init_seed = 1337;
  std::string activation_checkpointing = "none";
  // A sparse mixture-of-experts MLP (moe/sparse_moe.h) on every decoder_sparse_step-th layer
  // when num_local_experts > 0 (Mixtral; Qwen2-MoE with qkv_bias), Hugging Face's names.
  int64_t num_local_experts = 0;         // E; 0: every MLP dense
  int64_t num_experts_per_tok = 2;       // top-k
  int64_t moe_intermediate_size = 0;     // each expert's width; 0: intermediate_size
  int64_t shared_expert_intermediate_size = 0;  // Qwen2-MoE's sigmoid-gated shared expert; 0: none
  bool norm_topk_prob = true;            // renormalise the k routing weights (Mixtral: yes)
  int64_t decoder_sparse_step = 1;       // layer i is sparse when (i + 1) % step == 0
  double router_aux_loss_coef = 0.001;   // the load-balancing loss (Note [The load-balancing loss])
  double router_z_loss_coef = 0.0;       // ST-MoE's router z-loss
  double moe_capacity_factor = 0.0;      // 0: dropless; else tokens over capacity are dropped

  int64_t head_size() const { return n_embd / n_head; }
  // Whether layer `i`'s MLP is a mixture of experts, and how many layers' are.
  bool sparse_layer(int64_t i) const {
    return num_local_experts > 0 && (i + 1) % decoder_sparse_step == 0;
  }
  int64_t sparse_layers() const;
  int64_t expert_intermediate() const { return moe_intermediate_size > 0 ? moe_intermediate_size : intermediate_size; }
  // Throws naming the keys when the sizes are inconsistent.
  void validate() const;
  // Throws, naming the keys, when `tp` tensor-parallel ranks cannot split this model by its
  // plan (CausalLM::check_tensor_parallel, ModelFamily::check_tensor_parallel).
  void check_tensor_parallel(int64_t tp) const;

  // From the [model] section (arch "llama"); n_kv_heads 0 there is n_head, intermediate_size 0
  // is Meta's rule: 8/3 n_embd rounded up to a multiple of 256.
  static LlamaConfig from(const ModelConfig& cfg);
  ModelConfig to_model_config() const;
};

}  // namespace trident::models::llama
