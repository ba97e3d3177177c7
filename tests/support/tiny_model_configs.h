// The smallest model configs of each family that still exercise every code path (several
// blocks and heads, grouped kv heads for LLaMA), shared by the model tests.
#pragma once

#include "models/model_config.h"

namespace trident::models::testing {

inline ModelConfig tiny_gpt2() {
  ModelConfig c;
  c.n_layer = 3;
  c.n_head = 2;
  c.n_embd = 16;
  c.block_size = 8;
  c.vocab_size = 40;
  return c;
}

// 4 heads sharing 2 kv heads; tied or untied head, with or without Qwen2's q/k/v biases.
inline ModelConfig tiny_llama(bool tied, bool qkv_bias = false) {
  ModelConfig c = tiny_gpt2();
  c.arch = "llama";
  c.n_head = 4;
  c.family_values = {{"n_kv_heads", int64_t{2}},
                     {"intermediate_size", int64_t{24}},
                     {"tie_word_embeddings", tied},
                     {"qkv_bias", qkv_bias}};
  return c;
}

// Mixtral's shape: every layer's MLP 4 experts, top-2, renormalised.
inline ModelConfig tiny_mixtral() {
  ModelConfig c = tiny_llama(false);
  c.family_values["num_local_experts"] = int64_t{4};
  c.family_values["num_experts_per_tok"] = int64_t{2};
  c.family_values["moe_intermediate_size"] = int64_t{12};
  return c;
}

// Qwen2-MoE's: q/k/v biases, every second layer sparse (the others dense), raw top-2 weights
// and a shared expert.
inline ModelConfig tiny_qwen2_moe() {
  ModelConfig c = tiny_llama(true, true);
  c.family_values["num_local_experts"] = int64_t{4};
  c.family_values["num_experts_per_tok"] = int64_t{2};
  c.family_values["moe_intermediate_size"] = int64_t{8};
  c.family_values["shared_expert_intermediate_size"] = int64_t{16};
  c.family_values["norm_topk_prob"] = false;
  c.family_values["decoder_sparse_step"] = int64_t{2};
  return c;
}

// c with a context of `block_size` positions and, when `sliding_window` > 0, a sliding window
// of that many (a LLaMA family value).
inline ModelConfig with_context(ModelConfig c, int64_t block_size, int64_t sliding_window = 0) {
  c.block_size = block_size;
  if (sliding_window > 0) c.family_values["sliding_window"] = sliding_window;
  return c;
}

}  // namespace trident::models::testing
