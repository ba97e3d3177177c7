// A sparse mixture-of-experts MLP's shape and training knobs (moe/sparse_moe.h), as a model
// family fills them from its [model] keys (Hugging Face's MixtralConfig / Qwen2MoeConfig
// names: num_local_experts, num_experts_per_tok, moe_intermediate_size,
// shared_expert_intermediate_size, norm_topk_prob, router_aux_loss_coef).
#pragma once

#include <cstdint>

namespace trident::moe {

// Hugging Face's parameter names, so that a family's files map one to one:
//   kMixtral   gate.weight, experts.M.{w1,w3,w2}.weight (w1 the gate, w3 up, w2 down)
//   kQwen2Moe  gate.weight, experts.M.{gate,up,down}_proj.weight, shared_expert.*,
//              shared_expert_gate.weight
enum class MoeNaming { kMixtral, kQwen2Moe };

struct MoeConfig {
  int64_t hidden = 0;               // the model's width C
  int64_t experts = 8;              // E
  int64_t top_k = 2;                // experts per token
  int64_t expert_intermediate = 0;  // each expert's SwiGLU width
  int64_t shared_intermediate = 0;  // a shared expert's width (always applied, sigmoid-gated); 0: none
  bool norm_topk_prob = true;       // renormalise the k chosen probabilities to sum to 1 (Mixtral)
  double capacity_factor = 0.0;     // 0: dropless (Note [Top-k and capacity] in moe/routing.h)
  double aux_loss_coef = 0.0;       // load-balancing loss (Note [The load-balancing loss])
  double z_loss_coef = 0.0;         // ST-MoE's router z-loss
  int64_t moe_layers = 1;           // the model's MoE layers: each adds 1/moe_layers of the coefficients
  MoeNaming naming = MoeNaming::kMixtral;
};

}  // namespace trident::moe
