// GPT-2's shape: every size comes from here. In a training config it is the [model] section
// with arch = "gpt2" (models/model_config.h): the common keys, and layer_norm_eps of its own.
#pragma once

#include <cstdint>
#include <string>

#include "models/model_config.h"

namespace trident::models::gpt2 {

struct GPT2Config {
  int64_t n_layer = 12;         // transformer blocks (L)
  int64_t n_head = 12;          // attention heads (NH)
  int64_t n_embd = 768;         // model width (C)
  int64_t block_size = 1024;    // context length: the longest sequence (n_positions)
  int64_t vocab_size = 50257;   // V
  double dropout = 0.0;         // on embeddings, attention output and MLP output (training only)
  double layer_norm_eps = 1e-5;
  double init_std = 0.02;       // N(0, init_std); residual projections use init_std/sqrt(2L)
  int64_t init_seed = 1337;     // seed of the initial weights
  // Activation checkpointing per block (Note [Activation checkpointing] in model.cc):
  // "none", "selective" (recompute norms, attention and GELU; keep matmul outputs) or "full"
  // (keep only each block's input). Changes memory and speed, never the numbers.
  std::string activation_checkpointing = "none";

  int64_t head_size() const { return n_embd / n_head; }
  // Throws with a message naming the sizes if they are inconsistent.
  void validate() const;
  // Throws, naming the keys, when `tp` tensor-parallel ranks cannot split this model by its
  // plan (CausalLM::check_tensor_parallel, ModelFamily::check_tensor_parallel).
  void check_tensor_parallel(int64_t tp) const;

  // From and to the [model] section (arch "gpt2").
  static GPT2Config from(const ModelConfig& cfg);
  ModelConfig to_model_config() const;
};

}  // namespace trident::models::gpt2
