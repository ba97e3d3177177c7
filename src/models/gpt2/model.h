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
#include "models/causal_lm.h"
#include "models/gpt2/config.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/norm.h"
#include "nn/part_hooks.h"

namespace trident::models::gpt2 {

class CausalSelfAttention : public nn::Module {
 public:
  explicit CausalSelfAttention(const GPT2Config& cfg);
  // x (B,T,C) -> (B,T,C); with `cache`, decoding (see llama::Attention::forward).
  Tensor forward(const Tensor& x, Generator* dropout_gen, const ops::Documents* documents,
                 KvCacheAccess* cache = nullptr, int64_t layer = 0) const;
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
  Tensor forward(const Tensor& x, Generator* dropout_gen, const ops::Documents* documents,
                 KvCacheAccess* cache = nullptr, int64_t layer = 0) const;
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

// The model contract (models/causal_lm.h) says what each override does; GPT-2's answers:
// blocks are h.N; wte and wpe are the embedding, ln_f the head, which is tied to wte; part 0
// holds wte, wpe and ln_f; the plan splits c_attn (q, k, v) and c_fc by columns, both c_proj
// by rows and wte by vocabulary rows, and under sequence parallelism the LayerNorms and wpe
// work on each rank's part of the sequence.
class GPT2 : public CausalLM {
 public:
  // Builds the model and initializes it as GPT-2 does (seeded by cfg.init_seed).
  explicit GPT2(const GPT2Config& cfg);

  const ModelConfig& model_config() const override { return model_config_; }
  Tensor forward(const Tensor& idx, const ops::Documents* documents = nullptr) const override;
  Tensor loss(const Tensor& idx, const Tensor& targets, const ops::Documents* documents = nullptr) const override;
  Tensor embed(const Tensor& idx, const ops::Documents* documents = nullptr) const override;
  Tensor run_blocks(const Tensor& x, int64_t begin, int64_t end,
                    const ops::Documents* documents = nullptr) const override;
  Tensor head_loss(const Tensor& x, const Tensor& targets) const override;
  Tensor decode(const Tensor& idx, KvCacheAccess& cache) const override;
  std::pair<int64_t, int64_t> kv_cache_heads() const override { return {cfg_.n_head, cfg_.n_embd / cfg_.n_head}; }
  int64_t block_of(const std::string& name) const override;
  std::optional<std::string> tied_head_weight() const override { return "wte.weight"; }
  void set_part_hooks(nn::PartHooks* hooks) override { part_hooks_ = hooks; }
  Generator& dropout_generator() const override { return dropout_gen_; }
  void init_weights() override;
  nn::ParallelPlan parallel_plan(int64_t tp) const override;
  void check_tensor_parallel(int64_t tp) const override;
  std::optional<std::string> parameter_name_from_hf(std::string_view hf_name) const override;
  std::string hf_config_json() const override;

  const GPT2Config& config() const { return cfg_; }
  // The layers, for tests that look inside.
  Block& block(size_t i) { return *h_.at(i); }
  nn::Embedding& wte() { return *wte_; }
  nn::Embedding& wpe() { return *wpe_; }
  nn::LayerNorm& ln_f() { return *ln_f_; }

 private:
  Tensor hidden(const Tensor& idx, const ops::Documents* documents) const;  // final LayerNorm output (B,T,C)
  Generator* dropout() const;              // the dropout generator while training with dropout

  const GPT2Config cfg_;
  const ModelConfig model_config_;
  std::shared_ptr<nn::Embedding> wte_, wpe_;
  std::vector<std::shared_ptr<Block>> h_;
  std::shared_ptr<nn::LayerNorm> ln_f_;
  mutable Generator dropout_gen_;
  nn::PartHooks* part_hooks_ = nullptr;
};

}  // namespace trident::models::gpt2
