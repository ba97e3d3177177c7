#include "models/llama/shapes.h"

#include <string>

#include "models/causal_lm.h"

namespace trident::models::llama {

ModelShapes model_shapes(const LlamaConfig& cfg) {
  const int64_t C = cfg.n_embd, V = cfg.vocab_size, NH = cfg.n_head, HS = cfg.head_size();
  const int64_t Q = NH * HS, KV = cfg.n_kv_heads * HS, I = cfg.intermediate_size;
  ModelShapes s;
  const int64_t KVH = cfg.n_kv_heads;
  auto add = [&](std::string name, std::vector<int64_t> shape, int64_t block, int split_dim = -1,
                 int64_t split_heads = 0) {
    s.parameters.push_back({std::move(name), std::move(shape), block, split_dim, split_heads});
  };
  // Linear weights are (out, in): column-wise splits dim 0, row-wise dim 1 (Llama::parallel_plan).
  // k and v split by kv heads; with more tp ranks than kv heads they are replicated
  // (kColumnwiseReplicated): whole on every rank, each computing its one head.
  add("embed_tokens.weight", {V, C}, CausalLM::kEmbedding, 0);
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string l = "layers." + std::to_string(i) + ".";
    add(l + "input_layernorm.weight", {C}, i);
    add(l + "self_attn.q_proj.weight", {Q, C}, i, 0);
    if (cfg.qkv_bias) add(l + "self_attn.q_proj.bias", {Q}, i, 0);
    add(l + "self_attn.k_proj.weight", {KV, C}, i, 0, KVH);
    if (cfg.qkv_bias) add(l + "self_attn.k_proj.bias", {KV}, i, 0, KVH);
    add(l + "self_attn.v_proj.weight", {KV, C}, i, 0, KVH);
    if (cfg.qkv_bias) add(l + "self_attn.v_proj.bias", {KV}, i, 0, KVH);
    add(l + "self_attn.o_proj.weight", {C, Q}, i, 1);
    add(l + "post_attention_layernorm.weight", {C}, i);
    if (cfg.sparse_layer(i)) {
      // Llama's moe::SparseMoe, in its registration order; its experts are not tp-split.
      ++s.sparse_blocks;
      s.sparse_layers.push_back(i);
      s.experts = cfg.num_local_experts;
      s.experts_per_token = cfg.num_experts_per_tok;
      s.capacity_factor = cfg.moe_capacity_factor;
      const int64_t E = cfg.num_local_experts, EI = cfg.expert_intermediate(), SI = cfg.shared_expert_intermediate_size;
      const bool mixtral = !cfg.qkv_bias;
      const std::string m = l + (mixtral ? "block_sparse_moe." : "mlp.");
      add(m + "gate.weight", {E, C}, i);
      for (int64_t e = 0; e < E; ++e) {
        const std::string x = m + "experts." + std::to_string(e) + ".";
        const size_t first = s.parameters.size();
        if (mixtral) {
          add(x + "w1.weight", {EI, C}, i);
          add(x + "w2.weight", {C, EI}, i);
          add(x + "w3.weight", {EI, C}, i);
        } else {
          add(x + "gate_proj.weight", {EI, C}, i);
          add(x + "up_proj.weight", {EI, C}, i);
          add(x + "down_proj.weight", {C, EI}, i);
        }
        for (size_t j = first; j < s.parameters.size(); ++j) s.parameters[j].expert = e;
      }
      if (SI > 0) {
        add(m + "shared_expert.gate_proj.weight", {SI, C}, i);
        add(m + "shared_expert.up_proj.weight", {SI, C}, i);
        add(m + "shared_expert.down_proj.weight", {C, SI}, i);
        add(m + "shared_expert_gate.weight", {1, C}, i);
      }
      continue;
    }
    add(l + "mlp.gate_proj.weight", {I, C}, i, 0);
    add(l + "mlp.up_proj.weight", {I, C}, i, 0);
    add(l + "mlp.down_proj.weight", {C, I}, i, 1);
  }
  add("norm.weight", {C}, CausalLM::kHead);
  if (cfg.tie_word_embeddings) s.tied_head_weight = "embed_tokens.weight";
  else add("lm_head.weight", {V, C}, CausalLM::kHead, 0);
  // Block::forward: RoPE needs only its tables, so q and k stay as their rotated copies;
  // SwiGLU keeps its two inputs (Note [SwiGLU saves its inputs]).
  // {what, per token, f32, tp split, kept without checkpointing, kept by "selective", gathered
  // under sequence parallelism, heads it splits into (k and v: at most the kv heads)}
  s.block = {
      {"input (input_layernorm's)", C, false, false, true, true},
      {"input_layernorm statistics", 1, true},
      {"input_layernorm output (q, k, v's input)", C, false, false, true, false, true},
      {"q_proj output", Q, false, true, false, true},
      {"k_proj output", KV, false, true, false, true, false, KVH},
      {"rotated q", Q, false, true},
      {"rotated k", KV, false, true, true, false, false, KVH},
      {"v", KV, false, true, true, true, false, KVH},
      {"attention output (o_proj's input)", Q, false, true},
      {"attention log-sum-exp", NH, true, true},
      {"o_proj output", C, false, false, false, true, true},
      {"residual (post_attention_layernorm's input)", C},
      {"post_attention_layernorm statistics", 1, true},
      {"post_attention_layernorm output (the MLP's input)", C, false, false, true, false, true},
      {"gate", I, false, true, true, true},
      {"up", I, false, true, true, true},
      {"SwiGLU output (down_proj's input)", I, false, true},
      {"down_proj output", C, false, false, false, true, true},
  };
  if (s.sparse_blocks > 0) {
    // moe::SparseMoe::forward after the attention half (the dense block's first 14 entries):
    // the router's fp32 softmax and z-loss log-softmax, the routing's int64 indices, and per
    // routed row (K per token) the gathered input, the experts' gate and up (SwiGLU's inputs),
    // SwiGLU's output (down's input) and down's output (weighted by its row's probability).
    // grouped_linear keeps nothing for "selective" (it is no kept_or_computed product); the
    // router's and the shared expert's linears do. Under expert parallelism the rows the
    // experts see arrive by all_to_all_v; the gathered input kept is theirs (the rows are as
    // many under balanced routing), with one more int64 index (counted by the memory model).
    const int64_t K = cfg.num_experts_per_tok, E = cfg.num_local_experts, EI = cfg.expert_intermediate();
    const int64_t SI = cfg.shared_expert_intermediate_size;
    s.sparse_block.assign(s.block.begin(), s.block.begin() + 14);
    auto keep = [&](std::string what, int64_t per_token, bool f32, bool none, bool selective, bool i64 = false,
                    bool routed = false) {
      SavedActivation a{std::move(what), per_token, f32, false, none, selective};
      a.sp_gathered = true;  // the layer runs on the whole sequence (its sequence-parallel style gathers it)
      a.i64 = i64;
      a.routed = routed;
      s.sparse_block.push_back(a);
    };
    keep("router logits", E, false, false, true);
    keep("router probabilities", E, true, true, false);
    keep("router log-softmax (z-loss)", E, true, true, false);
    keep("z-loss log-sum-exp", 1, true, true, false);
    keep("chosen probabilities' indices", K, false, true, false, true);
    if (cfg.norm_topk_prob) {
      keep("chosen probabilities (renormalised's numerator)", K, true, true, false);
      keep("their sum", 1, true, true, false);
    }
    keep("token of each row", K, false, true, false, true, true);
    keep("rows at the experts (gate and up's input)", K * C, false, true, false, false, true);
    keep("expert gate", K * EI, false, true, false, false, true);
    keep("expert up", K * EI, false, true, false, false, true);
    keep("expert SwiGLU output (down's input)", K * EI, false, true, false, false, true);
    keep("expert outputs", K * C, false, true, false, false, true);
    keep("slot of each row", K, false, true, false, true, true);
    keep("row weights", K, false, true, false, false, true);
    if (SI > 0) {
      keep("shared expert gate logit", 1, false, false, true);
      keep("shared expert gate's tanh", 1, false, true, false);
      keep("shared expert gate (sigmoid)", 1, false, true, false);
      keep("shared expert gate", SI, false, true, true);
      keep("shared expert up", SI, false, true, true);
      keep("shared expert SwiGLU output", SI, false, true, false);
      keep("shared expert output", C, false, true, true);
    }
    s.sparse_block_matmuls = {{C, Q}, {C, KV}, {C, KV}, {Q, C}, {C, E}};
    if (SI > 0) s.sparse_block_matmuls.insert(s.sparse_block_matmuls.end(), {{C, SI}, {C, SI}, {SI, C}, {C, 1}});
    s.expert_matmuls = {{C, EI}, {C, EI}, {EI, C}};
  }
  s.head = {
      {"final input (norm's)", C},
      {"norm statistics", 1, true},
      {"norm output (the head's input)", C, false, false, true, false, true},
      {"loss log-sum-exp", 1, true},
  };
  s.block_matmuls = {{C, Q}, {C, KV}, {C, KV}, {Q, C}, {C, I}, {C, I}, {I, C}};
  s.head_matmul = {C, V};
  s.attention_heads = NH;
  s.head_size = HS;
  return s;
}

}  // namespace trident::models::llama
