// The model contract: what every causal LM family (GPT-2, LLaMA, ...) offers the code above
// models/ (torchtitan's ModelProtocol and TrainSpec, Megatron's GPTModel provider). The
// trainer, the parallel strategies, the planner, the CLI and inference see a model only as a
// CausalLM built by name from its config (models/registry.h); none of them includes a
// family's header (tests/layering_test.py).
//
// A family is written once, for one device, and knows nothing of parallelism: it states where
// its parameters live (blocks, embedding, head), which parts ZeRO-3 gathers together, and its
// tensor-parallel plan as data (nn/parallel_plan.h); parallel/ carries these out. Losses
// besides the LM loss (a router's load-balancing loss) go through aux_outputs(), attached
// where they are computed, so loss() and head_loss() stay the LM loss alone.
//
// Shapes: token ids (B,T) integer, T <= block_size; hidden states (B,T,C); logits (B,T,V).
// documents (ops/documents.h; null: each row is one sequence): rows of packed documents, each
// attending only to itself, with positions restarting at each (learned and rotary alike).
// The pieces of a forward (embed, run_blocks) take the same documents.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/rng.h"
#include "models/kv_cache_access.h"
#include "models/model_config.h"
#include "nn/aux_outputs.h"
#include "nn/module.h"
#include "nn/parallel_plan.h"
#include "nn/part_hooks.h"
#include "ops/documents.h"

namespace trident::models {

// Throws, naming `family`, unless `documents` (when given) describe token ids idx (B, T).
void check_documents(const ops::Documents* documents, const Tensor& idx, const char* family);

class CausalLM : public nn::Module {
 public:
  // The config it was built from (arch, the common keys, the family's own).
  virtual const ModelConfig& model_config() const = 0;

  // Logits (B,T,V) for token ids (B,T).
  virtual Tensor forward(const Tensor& idx, const ops::Documents* documents = nullptr) const = 0;
  // Mean cross-entropy of next-token targets (B,T) (ignore_index -1), a 0-dim tensor; the
  // whole model through the part hooks (embed, every block, head_loss). Only the LM loss:
  // auxiliary losses reach the backward through aux_outputs(), not through this value.
  virtual Tensor loss(const Tensor& idx, const Tensor& targets, const ops::Documents* documents = nullptr) const = 0;

  // loss() in three pieces, for pipeline stages (parallel/pipeline.h): the embeddings of
  // token ids (B,T) -> (B,T,C); blocks [begin, end) -> (B,T,C); the final norm, the LM head and
  // the loss.
  virtual Tensor embed(const Tensor& idx, const ops::Documents* documents = nullptr) const = 0;
  virtual Tensor run_blocks(const Tensor& x, int64_t begin, int64_t end,
                            const ops::Documents* documents = nullptr) const = 0;
  virtual Tensor head_loss(const Tensor& x, const Tensor& targets) const = 0;
  int64_t num_blocks() const { return model_config().n_layer; }

  // Generation with a KV cache: the new tokens idx (B, Tq) after each row's cached ones (their
  // positions and the cache from `cache`), run through every block, each layer's keys and
  // values added to the cache; returns the logits (B, V) of each row's last new token. No
  // gradients, no parallelism: one process holding the whole model.
  virtual Tensor decode(const Tensor& idx, KvCacheAccess& cache) const = 0;
  // What decode() caches per layer and token: {key/value heads, head size}.
  virtual std::pair<int64_t, int64_t> kv_cache_heads() const = 0;
  // The keys a query reads at most, counting its own (a sliding window: Mistral's); 0: all.
  virtual int64_t attention_window() const { return 0; }

  // Where parameter `name` is used: the index of its block, or kEmbedding (before the
  // blocks: the first pipeline stage) or kHead (after them: the last stage).
  static constexpr int64_t kEmbedding = -1;
  static constexpr int64_t kHead = -2;
  virtual int64_t block_of(const std::string& name) const = 0;
  // A mixture of experts: how many experts each sparse layer has (0: none), and the expert a
  // parameter belongs to (-1: not an expert's; a router and a shared expert are not). Expert
  // parallelism places parameters by it (parallel/expert_parallel.h).
  virtual int64_t num_experts() const { return 0; }
  virtual int64_t expert_of(const std::string& name) const {
    (void)name;
    return -1;
  }
  // The parameter shared by the embedding and the LM head (GPT-2's wte.weight), if the head
  // is tied: a pipeline keeps a copy on its last stage and sends its gradient back.
  virtual std::optional<std::string> tied_head_weight() const = 0;

  // The parameter groups used together, in the order the forward enters them (ZeRO-3's
  // gather units, nn/part_hooks.h): part 0, the root, spans the whole forward (embeddings,
  // final norm, head); part i + 1 is block i. Every parameter is in exactly one part. By
  // default, from block_of().
  virtual std::vector<std::vector<nn::NamedTensor>> parts() const;
  // Sends every part's forward through `hooks` (nullptr: none). The model does not own them.
  virtual void set_part_hooks(nn::PartHooks* hooks) = 0;

  // Auxiliary losses and metrics of the forward (nn/aux_outputs.h: a router's load-balancing
  // loss, expert load): the model owns it, a family hands it to the modules that add to them,
  // and the trainer sets its loss seed before each step's micro-batches and takes its values
  // after. A family needs no code for it.
  nn::AuxOutputs& aux_outputs() const { return aux_outputs_; }

  // Dropout randomness while training; seeded apart from the init (checkpoints save it).
  virtual Generator& dropout_generator() const = 0;
  // Re-draws every parameter from the family's init (model.init_seed).
  virtual void init_weights() = 0;

  // The tensor-parallel plan for `tp` ranks, as data (nn/parallel_plan.h).
  virtual nn::ParallelPlan parallel_plan(int64_t tp) const = 0;
  // Throws, naming the keys, when `tp` ranks cannot split this model by its plan (GPT-2:
  // n_head divisible by tp: each rank computes whole heads).
  virtual void check_tensor_parallel(int64_t tp) const = 0;

  // Hugging Face files: the parameter a tensor of an HF checkpoint stands for (nullopt for
  // tensors deliberately ignored, e.g. a tied lm_head or mask buffers; unknown names come back
  // unchanged so the caller reports them), and the model's config.json.
  virtual std::optional<std::string> parameter_name_from_hf(std::string_view hf_name) const = 0;
  virtual std::string hf_config_json() const = 0;

 private:
  mutable nn::AuxOutputs aux_outputs_;
};

}  // namespace trident::models
