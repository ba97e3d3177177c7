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
      s.experts = cfg.num_local_experts;
      const int64_t E = cfg.num_local_experts, EI = cfg.expert_intermediate(), SI = cfg.shared_expert_intermediate_size;
      const bool mixtral = !cfg.qkv_bias;
      const std::string m = l + (mixtral ? "block_sparse_moe." : "mlp.");
      add(m + "gate.weight", {E, C}, i);
      for (int64_t e = 0; e < E; ++e) {
        const std::string x = m + "experts." + std::to_string(e) + ".";
        if (mixtral) {
          add(x + "w1.weight", {EI, C}, i);
          add(x + "w2.weight", {C, EI}, i);
          add(x + "w3.weight", {EI, C}, i);
        } else {
          add(x + "gate_proj.weight", {EI, C}, i);
          add(x + "up_proj.weight", {EI, C}, i);
          add(x + "down_proj.weight", {C, EI}, i);
        }
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
