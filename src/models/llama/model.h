// The LLaMA family (Hugging Face's LlamaForCausalLM; Mistral and Qwen2 by config), written for
// one device: token embedding; pre-norm blocks of RMSNorm -> attention (q, k, v projections,
// rotary positions on q and k, grouped-query attention with n_kv_heads <= n_head, o
// projection) -> residual, RMSNorm -> SwiGLU MLP down(silu(gate(x)) * up(x)) -> residual;
// a final RMSNorm; an LM head, tied to the embedding or its own. Layers are torch.nn.Linear's
// (out, in) layout under Hugging Face's names without the "model." prefix
// ("layers.0.self_attn.q_proj.weight"), q and k in HF's rotate-half RoPE layout, so HF
// checkpoints map one to one.
//
// By config: Llama 3's RoPE frequency scaling (core/rope_params.h), Qwen2's q/k/v biases and
// Mistral's sliding-window attention (every layer; Note [Sliding window] in
// kernels/cpu/attention.h), Mixtral's and Qwen2-MoE's sparse mixture-of-experts MLPs
// (moe/sparse_moe.h).
#pragma once

#include <memory>
#include <vector>

#include "models/causal_lm.h"
#include "models/llama/config.h"
#include "moe/sparse_moe.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/norm.h"

namespace trident::models::llama {

class Attention : public nn::Module {
 public:
  explicit Attention(const LlamaConfig& cfg);
  // (B,T,C) -> (B,T,C); with `cache`, decoding: x holds the new tokens, layer `layer`'s keys and
  // values go into the cache and the queries see every cached key.
  Tensor forward(const Tensor& x, const ops::Documents* documents, KvCacheAccess* cache = nullptr,
                 int64_t layer = 0) const;

 private:
  const LlamaConfig cfg_;
  std::shared_ptr<nn::Linear> q_proj_, k_proj_, v_proj_, o_proj_;
};

class MLP : public nn::Module {
 public:
  explicit MLP(const LlamaConfig& cfg);
  Tensor forward(const Tensor& x) const;

 private:
  std::shared_ptr<nn::Linear> gate_proj_, up_proj_, down_proj_;
};

class Block : public nn::Module {
 public:
  // Layer `layer` of the model: its MLP a mixture of experts when cfg.sparse_layer(layer),
  // whose router adds its losses to `aux`.
  Block(const LlamaConfig& cfg, int64_t layer, nn::AuxOutputs* aux);
  Tensor forward(const Tensor& x, const ops::Documents* documents, KvCacheAccess* cache = nullptr,
                 int64_t layer = 0) const;

 private:
  // Hugging Face's order: input_layernorm, self_attn, post_attention_layernorm, mlp.
  std::shared_ptr<nn::RMSNorm> input_layernorm_;
  std::shared_ptr<Attention> self_attn_;
  std::shared_ptr<nn::RMSNorm> post_attention_layernorm_;
  std::shared_ptr<MLP> mlp_;             // dense layers
  std::shared_ptr<moe::SparseMoe> moe_;  // sparse layers: "block_sparse_moe" (Mixtral) or "mlp" (Qwen2-MoE)
};

// The mixture-of-experts layer of `cfg` (every sparse layer's).
moe::MoeConfig moe_config(const LlamaConfig& cfg);

// The contract (models/causal_lm.h); LLaMA's answers: blocks are layers.N; embed_tokens is
// the embedding; norm and lm_head (when untied) are the head; part 0 holds embed_tokens,
// norm and lm_head. Its tensor-parallel plan is Megatron's: q, gate and up by columns, o and
// down by rows, k and v by columns when the ranks divide the kv heads and replicated (each
// rank the head its query heads read) when they are fewer; the embedding and an untied head
// by vocabulary rows; the RMSNorms on each rank's part of the sequence under sequence
// parallelism.
class Llama : public CausalLM {
 public:
  explicit Llama(const LlamaConfig& cfg);

  const ModelConfig& model_config() const override { return model_config_; }
  Tensor forward(const Tensor& idx, const ops::Documents* documents = nullptr) const override;
  Tensor loss(const Tensor& idx, const Tensor& targets, const ops::Documents* documents = nullptr) const override;
  Tensor embed(const Tensor& idx, const ops::Documents* documents = nullptr) const override;
  Tensor run_blocks(const Tensor& x, int64_t begin, int64_t end,
                    const ops::Documents* documents = nullptr) const override;
  Tensor head_loss(const Tensor& x, const Tensor& targets) const override;
  Tensor decode(const Tensor& idx, KvCacheAccess& cache) const override;
  std::pair<int64_t, int64_t> kv_cache_heads() const override { return {cfg_.n_kv_heads, cfg_.head_size()}; }
  int64_t attention_window() const override { return cfg_.sliding_window; }
  int64_t block_of(const std::string& name) const override;
  int64_t num_experts() const override { return cfg_.num_local_experts; }
  int64_t expert_of(const std::string& name) const override;
  std::optional<std::string> tied_head_weight() const override;
  void set_part_hooks(nn::PartHooks* hooks) override { part_hooks_ = hooks; }
  Generator& dropout_generator() const override { return dropout_gen_; }
  void init_weights() override;
  nn::ParallelPlan parallel_plan(int64_t tp) const override;
  void check_tensor_parallel(int64_t tp) const override;
  std::optional<std::string> parameter_name_from_hf(std::string_view hf_name) const override;
  std::string hf_config_json() const override;

  const LlamaConfig& config() const { return cfg_; }

 private:
  Tensor hidden(const Tensor& idx, const ops::Documents* documents) const;  // the final norm's output (B,T,C)

  const LlamaConfig cfg_;
  const ModelConfig model_config_;
  std::shared_ptr<nn::Embedding> embed_tokens_;
  std::vector<std::shared_ptr<Block>> layers_;
  std::shared_ptr<nn::RMSNorm> norm_;
  std::shared_ptr<nn::Linear> lm_head_;  // null when tied to embed_tokens
  // No dropout in this family; the generator exists for the contract (checkpoints save it).
  mutable Generator dropout_gen_;
  nn::PartHooks* part_hooks_ = nullptr;
};

// Hugging Face's config.json for `cfg` (LlamaConfig, or Qwen2Config with qkv_bias).
std::string hf_config_json(const LlamaConfig& cfg);

}  // namespace trident::models::llama
