// What a model is made of, stated by its family without building it (models/registry.h,
// ModelFamily::shapes): every parameter's shape and where it is used, how tensor parallelism
// splits it, and what each part of the forward keeps for the backward, per token. The planner
// (planner/memory_model.h, planner/time_model.h) reads only this; tests/models/model_shapes_test
// checks it against the built model's parameters, and the planner's memory tests against the
// allocator's measurements of training steps, so the family states its shapes once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trident::models {

struct ParameterShape {
  std::string name;            // as named_parameters() names it
  std::vector<int64_t> shape;  // on one device
  int64_t block;               // CausalLM::block_of: a block index, kEmbedding or kHead
  // The dimension tensor-parallel ranks split it along (the family's parallel_plan); -1: every
  // tp rank holds it whole (norms, biases of row-wise layers, position embeddings).
  int split_dim = -1;
  // Split only while tp divides into this many heads (0: no limit): past it every rank holds
  // the tensor whole and uses its head's rows (LLaMA's k and v with fewer kv heads than ranks,
  // kColumnwiseReplicated).
  int64_t split_heads = 0;
  // Equal blocks along split_dim, each split alike (GPT-2's c_attn: q, k and v side by side: 3).
  int64_t split_blocks = 1;
  // A mixture-of-experts layer's expert parameter: its expert (CausalLM::expert_of); -1: not
  // one (a router and a shared expert are not). Expert parallelism places it on one ep rank.
  int64_t expert = -1;
  int64_t numel() const;
  // Elements on one of `tp` ranks (the largest share: a split that does not divide evenly, a
  // vocabulary, gives the first ranks one row more; parallel/tensor_parallel.h).
  int64_t numel_on_rank(int64_t tp) const;
};

// A tensor the forward keeps for the backward, in elements per token of the micro-batch, and
// which activation-checkpointing modes keep it (Note [Activation checkpointing] in
// models/gpt2/model.cc): "none" what the backward reads, "selective" the block's input and its
// matrix products' outputs, "full" only the input (a block's first entry).
struct SavedActivation {
  std::string what;         // "qkv", "ln_1 statistics"
  int64_t per_token;        // elements per token
  bool f32 = false;         // fp32 whatever the compute dtype (norm statistics, softmax log-sum-exp)
  bool tp_split = false;    // in the tensor-parallel region: each of tp ranks keeps 1/tp of it
  bool kept_none = true;    // kept without checkpointing
  bool kept_selective = false;
  // Under sequence parallelism the rank keeps it whole along the sequence: a column-parallel
  // product's input (the norm's output after the all-gather) or a row-parallel product's
  // output (kept by "selective" before its reduce-scatter).
  bool sp_gathered = false;
  // A tp-split tensor of so many heads (0: no limit): past that many ranks each rank computes
  // one head's share (a replicated k or v projection's output).
  int64_t split_heads = 0;
  bool i64 = false;  // int64 whatever the compute dtype (a mixture of experts' row indices)
  // A mixture of experts' per routed row: k per token dropless, fewer under a capacity factor
  // below 1 (ModelShapes::capacity_factor).
  bool routed = false;
};

struct ModelShapes {
  std::vector<ParameterShape> parameters;  // in named_parameters() order
  std::optional<std::string> tied_head_weight;
  // Kept by one block (its input first: under "full" checkpointing only the input stays).
  std::vector<SavedActivation> block;
  // Kept by the final norm and the fused LM head + loss, after the last block's output.
  std::vector<SavedActivation> head;
  // The matrix products of one block's forward per token, as (in, out) features; the head's
  // (C, V) apart. The time model's FLOPs: 2 x in x out per token and product, three times
  // that for forward + backward.
  std::vector<std::pair<int64_t, int64_t>> block_matmuls;
  std::pair<int64_t, int64_t> head_matmul{0, 0};
  int64_t attention_heads = 0;  // query heads per block
  int64_t head_size = 0;
  // Blocks with a mixture-of-experts MLP (moe/sparse_moe.h): `block` and `block_matmuls`
  // describe the dense ones, `sparse_block` and `sparse_block_matmuls` these. A sparse block's
  // per-token entries count its routed rows at k rows per token (dropless routing, and under
  // expert parallelism balanced routing: Note [The planner's mixture of experts] in
  // planner/memory_model.cc).
  int64_t sparse_blocks = 0;
  std::vector<int64_t> sparse_layers;  // their block indices
  int64_t experts = 0;                 // of each sparse block
  int64_t experts_per_token = 0;       // k: the rows each token is routed to
  double capacity_factor = 0.0;        // model.moe_capacity_factor (0: dropless)
  std::vector<SavedActivation> sparse_block;
  // What every token runs through in a sparse block (attention, the router, a shared expert),
  // and one expert's products per routed row (k per token).
  std::vector<std::pair<int64_t, int64_t>> sparse_block_matmuls;
  std::vector<std::pair<int64_t, int64_t>> expert_matmuls;
  bool is_sparse(int64_t block) const;

  int64_t num_parameters() const;
  // Elements the parameters of blocks [begin, end) (and, by the flags, the embedding and the
  // head) hold on one of `tp` tensor-parallel ranks.
  int64_t parameters_on_rank(int64_t tp, int64_t begin, int64_t end, bool embedding, bool head) const;
};

// 2 x in x out x count: the FLOPs per token of a list of matrix products.
int64_t matmul_flops_per_token(const std::vector<std::pair<int64_t, int64_t>>& matmuls);

}  // namespace trident::models
