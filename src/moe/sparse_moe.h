// A sparse mixture-of-experts MLP (Mixtral's MixtralSparseMoeBlock, Qwen2-MoE's
// Qwen2MoeSparseMoeBlock), written for one device: a linear router over E experts, each a
// SwiGLU MLP; every token goes to its top-k experts (moe/routing.h) and gets their outputs
// weighted by the router's probabilities (renormalised over the k, or not); an optional shared
// expert sees every token, gated by sigmoid(shared_expert_gate(x)) (Qwen2-MoE).
//
// The experts run as grouped products (autograd/functions/moe.h): tokens gathered into
// expert-contiguous rows, one grouped GEMM per projection over all experts, the results
// weighted and summed back into their tokens; the backward likewise.
//
// Note [The load-balancing loss]
// Per layer, Hugging Face's load_balancing_loss_func on that layer's router logits:
// E x sum_e f_e P_e, f_e the share of the tokens' k choices that went to expert e before any
// dropping (sum_e f_e = k) and P_e the mean router probability of e; f is a constant, so the
// gradient reaches the router through P. Hugging Face concatenates every layer's logits into
// one call, which couples the layers (products of means over all of them): no layer's
// gradient is known before the last layer's forward, which a pipeline stage or a checkpointed
// block cannot wait for. trident adds each layer's loss times coefficient / moe_layers, the
// mean over layers (Megatron-Core and torchtitan also use per-layer losses; Megatron sums them):
// for one MoE layer, or layers routing alike, it is Hugging Face's value. The router z-loss
// (ST-MoE) is the mean over tokens of logsumexp(logits)^2, per layer likewise. Both go
// through the model's AuxOutputs (nn/aux_outputs.h) as "moe_aux_loss" and "moe_z_loss",
// recorded without their coefficients; "moe_dropped" (choices dropped by the capacity, per
// layer) and "moe_max_load" (the busiest expert's share of the choices) are metrics. Per
// layer, the two losses, the choices per expert before dropping ("moe_tokens", E values) and
// the dropped ones ("moe_dropped", one) are added to the layer's sums
// (AuxOutputs::add_layer_sums), which the trainer writes per layer (Note [Tokens per expert]
// in train/moe_metrics.h).
//
// An expert whose layers carry wrappers (LoRA's factors, a quantized view: nn/wrapper.h) makes the
// layer run its experts one by one through their layers, so that the wrappers apply; the grouped
// products read the weights directly.
//
// Expert parallelism plugs in through set_dispatch (moe/expert_dispatch.h): the routing, losses
// and grouped products stay here, the exchange of rows is parallel/expert_parallel.h's.
// Sequence parallelism through set_token_scope (moe/token_scope.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "moe/expert_dispatch.h"
#include "moe/moe_config.h"
#include "moe/routing.h"
#include "moe/token_scope.h"
#include "nn/aux_outputs.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace trident::moe {

// One SwiGLU MLP, down(silu(gate(x)) * up(x)), under the naming's layer names.
class SwiGluExpert : public nn::Module {
 public:
  SwiGluExpert(int64_t hidden, int64_t intermediate, MoeNaming naming);
  Tensor forward(const Tensor& x) const;
  const Tensor& gate_weight() const { return gate_->weight(); }
  const Tensor& up_weight() const { return up_->weight(); }
  const Tensor& down_weight() const { return down_->weight(); }
  // Whether a layer carries a wrapper (an adapter, a quantized view): then the experts run one
  // by one through their layers instead of the grouped products.
  bool wrapped() const {
    return !gate_->wrappers().empty() || !up_->wrappers().empty() || !down_->wrappers().empty();
  }

 private:
  std::shared_ptr<nn::Linear> gate_, up_, down_;
};

class SparseMoe : public nn::Module {
 public:
  // `aux` (the model's, not owned; null: losses and metrics are not recorded) receives the
  // router's losses and metrics; `layer` (the decoder layer's index) names its per-layer sums.
  SparseMoe(const MoeConfig& cfg, nn::AuxOutputs* aux, int64_t layer = 0);
  // (..., C) -> (..., C).
  Tensor forward(const Tensor& x) const;

  const MoeConfig& config() const { return cfg_; }
  int64_t layer() const { return layer_; }
  // The routing of the last forward (tests, monitoring).
  const Routing& last_routing() const { return last_; }
  // Expert parallelism (moe/expert_dispatch.h), set from outside; null: every expert here.
  void set_dispatch(std::shared_ptr<const ExpertDispatch> dispatch) { dispatch_ = std::move(dispatch); }
  const ExpertDispatch* dispatch() const { return dispatch_.get(); }
  // Sequence parallelism (moe/token_scope.h), set from outside; null: the input is the whole
  // micro-batch.
  void set_token_scope(std::shared_ptr<const TokenScope> scope) { scope_ = std::move(scope); }

 private:
  // Experts [first, first + count) on their rows: xs (R, C) sorted by expert, expert first + e
  // the rows [offsets[e], offsets[e + 1]).
  Tensor run_experts(const Tensor& xs, const std::vector<int64_t>& offsets, int64_t first) const;

  const MoeConfig cfg_;
  nn::AuxOutputs* aux_;
  const int64_t layer_;
  std::shared_ptr<nn::Linear> gate_;  // the router: (E, C)
  std::vector<std::shared_ptr<SwiGluExpert>> experts_;
  std::shared_ptr<SwiGluExpert> shared_expert_;      // null without one
  std::shared_ptr<nn::Linear> shared_expert_gate_;   // (1, C)
  mutable Routing last_;
  std::shared_ptr<const ExpertDispatch> dispatch_;
  std::shared_ptr<const TokenScope> scope_;
};

}  // namespace trident::moe
