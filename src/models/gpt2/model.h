// GPT-2 exactly as Hugging Face's GPT2LMHeadModel: token + learned position embeddings,
// pre-LayerNorm blocks (causal self-attention with a fused qkv projection `c_attn`, output
// projection `c_proj`; MLP `c_fc` (4x) with tanh-GELU and `c_proj`), a final `ln_f`, and an
// LM head tied to `wte`. Parameter names and layouts are Hugging Face's (Conv1D [in, out]),
// so checkpoints map one to one (hf_names.h).
//
// Shapes: idx (B,T) integer token ids, T <= block_size; logits (B,T,V).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "core/rng.h"
#include "models/gpt2/config.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/norm.h"
#include "nn/part_hooks.h"

namespace trident::models::gpt2 {

class CausalSelfAttention : public nn::Module {
 public:
  explicit CausalSelfAttention(const GPT2Config& cfg);
  Tensor forward(const Tensor& x, Generator* dropout_gen) const;  // x (B,T,C) -> (B,T,C)
  nn::Conv1D& c_attn() { return *c_attn_; }
  nn::Conv1D& c_proj() { return *c_proj_; }

 private:
  const GPT2Config cfg_;
  std::shared_ptr<nn::Conv1D> c_attn_;  // (C, 3C): q, k, v
  std::shared_ptr<nn::Conv1D> c_proj_;  // (C, C)
};

class MLP : public nn::Module {
 public:
  explicit MLP(const GPT2Config& cfg);
  Tensor forward(const Tensor& x, Generator* dropout_gen) const;
  nn::Conv1D& c_fc() { return *c_fc_; }
  nn::Conv1D& c_proj() { return *c_proj_; }

 private:
  const GPT2Config cfg_;
  std::shared_ptr<nn::Conv1D> c_fc_;    // (C, 4C)
  std::shared_ptr<nn::Conv1D> c_proj_;  // (4C, C)
};

class Block : public nn::Module {
 public:
  explicit Block(const GPT2Config& cfg);
  Tensor forward(const Tensor& x, Generator* dropout_gen) const;
  CausalSelfAttention& attn() { return *attn_; }
  MLP& mlp() { return *mlp_; }
  nn::LayerNorm& ln_1() { return *ln_1_; }
  nn::LayerNorm& ln_2() { return *ln_2_; }

 private:
  // Declared (hence registered) in Hugging Face's order: ln_1, attn, ln_2, mlp.
  std::shared_ptr<nn::LayerNorm> ln_1_;
  std::shared_ptr<CausalSelfAttention> attn_;
  std::shared_ptr<nn::LayerNorm> ln_2_;
  std::shared_ptr<MLP> mlp_;
};

class GPT2 : public nn::Module {
 public:
  // Builds the model and initializes it as GPT-2 does (seeded by cfg.init_seed).
  explicit GPT2(const GPT2Config& cfg);

  // Logits (B,T,V) for token ids (B,T).
  Tensor forward(const Tensor& idx) const;
  // Mean cross-entropy of next-token targets (B,T) (ignore_index -1), a 0-dim tensor.
  Tensor loss(const Tensor& idx, const Tensor& targets) const;

  // loss() in three pieces, for pipeline stages (parallel/pipeline.h): embeddings of token ids
  // (B,T) -> (B,T,C); blocks [begin, end); and ln_f, the tied head and the loss.
  Tensor embed(const Tensor& idx) const;
  Tensor run_blocks(const Tensor& x, int64_t begin, int64_t end) const;
  Tensor head_loss(const Tensor& x, const Tensor& targets) const;

  const GPT2Config& config() const { return cfg_; }
  // Dropout randomness while training; seeded separately from the init.
  Generator& dropout_generator() const { return dropout_gen_; }
  // Re-draws every parameter from the GPT-2 init distribution (cfg.init_seed).
  void init_weights();

  // The parameter groups used together, in the order the forward enters them (for parameter
  // sharding, nn/part_hooks.h): part 0, the root, spans the whole forward and holds the
  // embeddings (wte is also the LM head) and ln_f; part i + 1 is block h.i. Every parameter
  // is in exactly one part; names as named_parameters().
  std::vector<std::vector<nn::NamedTensor>> parts() const;
  // The layers, for parallelism plans that shard them (parallel/tensor_parallel.h).
  Block& block(size_t i) { return *h_.at(i); }
  nn::Embedding& wte() { return *wte_; }
  nn::Embedding& wpe() { return *wpe_; }
  nn::LayerNorm& ln_f() { return *ln_f_; }
  // Sends every part's forward through `hooks` (nullptr: none). The model does not own them.
  void set_part_hooks(nn::PartHooks* hooks) { part_hooks_ = hooks; }

 private:
  Tensor hidden(const Tensor& idx) const;  // final LayerNorm output (B,T,C)
  Generator* dropout() const;              // the dropout generator while training with dropout

  const GPT2Config cfg_;
  std::shared_ptr<nn::Embedding> wte_, wpe_;
  std::vector<std::shared_ptr<Block>> h_;
  std::shared_ptr<nn::LayerNorm> ln_f_;
  mutable Generator dropout_gen_;
  nn::PartHooks* part_hooks_ = nullptr;
};

}  // namespace trident::models::gpt2
