#include "models/gpt2/shapes.h"

#include <string>

#include "models/causal_lm.h"

namespace trident::models::gpt2 {

ModelShapes model_shapes(const GPT2Config& cfg) {
  const int64_t C = cfg.n_embd, V = cfg.vocab_size, NH = cfg.n_head;
  ModelShapes s;
  auto add = [&](std::string name, std::vector<int64_t> shape, int64_t block, int split_dim = -1, int64_t blocks = 1) {
    s.parameters.push_back({std::move(name), std::move(shape), block, split_dim, 0, blocks});
  };
  // The order of named_parameters(): registration order (model.cc). Conv1D weights are
  // (in, out): column-wise splits dim 1 (and the bias), row-wise dim 0 (GPT2::parallel_plan).
  add("wte.weight", {V, C}, CausalLM::kEmbedding, 0);
  add("wpe.weight", {cfg.block_size, C}, CausalLM::kEmbedding);
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    add(h + "ln_1.weight", {C}, i);
    add(h + "ln_1.bias", {C}, i);
    add(h + "attn.c_attn.weight", {C, 3 * C}, i, 1, 3);  // q, k and v, each split alike
    add(h + "attn.c_attn.bias", {3 * C}, i, 0, 3);
    add(h + "attn.c_proj.weight", {C, C}, i, 0);
    add(h + "attn.c_proj.bias", {C}, i);
    add(h + "ln_2.weight", {C}, i);
    add(h + "ln_2.bias", {C}, i);
    add(h + "mlp.c_fc.weight", {C, 4 * C}, i, 1);
    add(h + "mlp.c_fc.bias", {4 * C}, i, 0);
    add(h + "mlp.c_proj.weight", {4 * C, C}, i, 0);
    add(h + "mlp.c_proj.bias", {C}, i);
  }
  add("ln_f.weight", {C}, CausalLM::kHead);
  add("ln_f.bias", {C}, CausalLM::kHead);
  s.tied_head_weight = "wte.weight";
  // Block::forward (Note [Activation checkpointing] in model.cc). Dropout masks are not listed:
  // the planner's configs train without dropout. {what, per token, f32, tp split, none, selective, gathered under sequence parallelism}
  s.block = {
      {"input (ln_1's)", C, false, false, true, true},
      {"ln_1 statistics", 2, true},
      {"ln_1 output (c_attn's input)", C, false, false, true, false, true},
      {"qkv", 3 * C, false, true, true, true},
      {"attention output (c_proj's input)", C, false, true},
      {"attention log-sum-exp", NH, true, true},
      {"attn.c_proj output", C, false, false, false, true, true},
      {"residual (ln_2's input)", C},
      {"ln_2 statistics", 2, true},
      {"ln_2 output (c_fc's input)", C, false, false, true, false, true},
      {"c_fc output (GELU's input)", 4 * C, false, true, true, true},
      {"GELU output (c_proj's input)", 4 * C, false, true},
      {"mlp.c_proj output", C, false, false, false, true, true},
  };
  s.head = {
      {"final input (ln_f's)", C},
      {"ln_f statistics", 2, true},
      {"ln_f output (the head's input)", C, false, false, true, false, true},
      {"loss log-sum-exp", 1, true},
  };
  s.block_matmuls = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}};
  s.head_matmul = {C, V};
  s.attention_heads = NH;
  s.head_size = C / NH;
  return s;
}

}  // namespace trident::models::gpt2
