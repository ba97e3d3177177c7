#include "moe/sparse_moe.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "autograd/functions.h"
#include "core/copy.h"
#include "core/factory.h"

namespace trident::moe {
namespace {

struct ExpertNames {
  const char *gate, *up, *down;
};
ExpertNames expert_names(MoeNaming naming) {
  if (naming == MoeNaming::kMixtral) return {"w1", "w3", "w2"};
  return {"gate_proj", "up_proj", "down_proj"};
}

// An index tensor on `device`.
Tensor indices(const std::vector<int64_t>& values, const Device& device) {
  Tensor t = from_vector(values, {static_cast<int64_t>(values.size())});
  return device.is_cpu() ? t : core::to_device(t, device);
}

// TRIDENT_MOE_GROUPED=0 runs the experts one by one through their layers (the wrapped experts'
// path): the loop of per-expert products the grouped ones replace, for benchmarks to compare.
bool grouped_products() {
  static const bool on = [] {
    const char* v = std::getenv("TRIDENT_MOE_GROUPED");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}

// sigmoid(z) = (1 + tanh(z / 2)) / 2, from the differentiable pointwise ops.
Tensor sigmoid(const Tensor& z) { return trident::affine(trident::tanh(z * 0.5), 0.5, 0.5); }

}  // namespace

SwiGluExpert::SwiGluExpert(int64_t hidden, int64_t intermediate, MoeNaming naming) {
  const ExpertNames n = expert_names(naming);
  // Hugging Face's registration order: Mixtral's w1, w2, w3; Qwen2-MoE's gate, up, down.
  if (naming == MoeNaming::kMixtral) {
    gate_ = register_module(n.gate, std::make_shared<nn::Linear>(hidden, intermediate, false));
    down_ = register_module(n.down, std::make_shared<nn::Linear>(intermediate, hidden, false));
    up_ = register_module(n.up, std::make_shared<nn::Linear>(hidden, intermediate, false));
  } else {
    gate_ = register_module(n.gate, std::make_shared<nn::Linear>(hidden, intermediate, false));
    up_ = register_module(n.up, std::make_shared<nn::Linear>(hidden, intermediate, false));
    down_ = register_module(n.down, std::make_shared<nn::Linear>(intermediate, hidden, false));
  }
}

Tensor SwiGluExpert::forward(const Tensor& x) const {
  return down_->forward(trident::swiglu(gate_->forward(x), up_->forward(x)));
}

SparseMoe::SparseMoe(const MoeConfig& cfg, nn::AuxOutputs* aux, int64_t layer)
    : cfg_(cfg), aux_(aux), layer_(layer) {
  TRI_CHECK(cfg.hidden >= 1 && cfg.experts >= 1 && cfg.expert_intermediate >= 1, "moe: hidden ", cfg.hidden,
            ", experts ", cfg.experts, " and expert width ", cfg.expert_intermediate, " must be at least 1");
  TRI_CHECK(cfg.top_k >= 1 && cfg.top_k <= cfg.experts, "moe: num_experts_per_tok (", cfg.top_k,
            ") must be between 1 and the number of experts (", cfg.experts, ")");
  TRI_CHECK(cfg.moe_layers >= 1, "moe: moe_layers ", cfg.moe_layers, " must be at least 1");
  gate_ = register_module("gate", std::make_shared<nn::Linear>(cfg.hidden, cfg.experts, false));
  for (int64_t e = 0; e < cfg.experts; ++e)
    experts_.push_back(register_module("experts." + std::to_string(e),
                                       std::make_shared<SwiGluExpert>(cfg.hidden, cfg.expert_intermediate, cfg.naming)));
  if (cfg.shared_intermediate > 0) {
    shared_expert_ = register_module(
        "shared_expert", std::make_shared<SwiGluExpert>(cfg.hidden, cfg.shared_intermediate, MoeNaming::kQwen2Moe));
    shared_expert_gate_ = register_module("shared_expert_gate", std::make_shared<nn::Linear>(cfg.hidden, 1, false));
  }
}

Tensor SparseMoe::run_experts(const Tensor& xs, const std::vector<int64_t>& offsets, int64_t first) const {
  const size_t count = offsets.size() - 1;
  const auto begin = experts_.begin() + first, end = begin + static_cast<std::ptrdiff_t>(count);
  if (!grouped_products() || std::any_of(begin, end, [](const auto& e) { return e->wrapped(); })) {
    // Wrapped layers (adapters, quantized views): each expert through its own layers, an
    // expert without rows too, so that every expert's parameters get a (zero) gradient on every
    // rank and data parallelism's buckets fill alike everywhere.
    std::vector<Tensor> parts;
    for (size_t e = 0; e < count; ++e)
      parts.push_back(experts_[static_cast<size_t>(first) + e]->forward(
          trident::narrow(xs, 0, offsets[e], offsets[e + 1] - offsets[e])));
    return parts.size() == 1 ? parts[0] : trident::concat(parts, 0);
  }
  std::vector<Tensor> gate, up, down;
  for (auto it = begin; it != end; ++it) {
    gate.push_back((*it)->gate_weight());
    up.push_back((*it)->up_weight());
    down.push_back((*it)->down_weight());
  }
  const Tensor h = trident::swiglu(trident::grouped_linear(xs, gate, offsets), trident::grouped_linear(xs, up, offsets));
  return trident::grouped_linear(h, down, offsets);
}

Tensor SparseMoe::forward(const Tensor& part) const {
  const Tensor x = scope_ ? scope_->enter(part) : part;
  const int64_t C = cfg_.hidden, E = cfg_.experts, k = cfg_.top_k;
  TRI_CHECK(x.dim() >= 1 && x.size(-1) == C, "moe: expected inputs (..., ", C, "), got ", x.shape());
  const int64_t N = x.numel() / C;
  const Tensor xf = trident::reshape(x, {N, C});
  // The router in fp32 whatever the compute dtype (Hugging Face's softmax(..., dtype=float)).
  const Tensor logits = gate_->forward(xf);
  const Tensor logits32 = logits.dtype() == DType::kF32 ? logits : trident::to(logits, DType::kF32);
  const Tensor probs = trident::softmax(logits32, -1);
  const Tensor host_probs = core::contiguous(core::to_device(detach(probs), Device::cpu()));
  // The capacity drops tokens while training only: evaluation and generation are dropless, as
  // Hugging Face's models are, so a token's output never depends on the rest of its batch.
  const double capacity_factor = is_training() ? cfg_.capacity_factor : 0.0;
  last_ = route_top_k(host_probs.data_ptr<float>(), N, E, k, expert_capacity(capacity_factor, N, k, E));
  const Routing& r = last_;

  // The chosen probabilities, slot by slot (N * k, 1); renormalised over each token's k.
  std::vector<int64_t> prob_of_slot(static_cast<size_t>(N * k));
  for (int64_t s = 0; s < N * k; ++s) prob_of_slot[static_cast<size_t>(s)] = (s / k) * E + r.expert_of_slot[static_cast<size_t>(s)];
  Tensor weights = trident::embedding(trident::reshape(probs, {N * E, 1}), indices(prob_of_slot, x.device()));
  if (cfg_.norm_topk_prob) {
    const Tensor w = trident::reshape(weights, {N, k});
    weights = trident::reshape(w / trident::sum(w, {1}, true), {N * k, 1});
  }
  if (weights.dtype() != x.dtype()) weights = trident::to(weights, x.dtype());

  // Tokens into expert-contiguous rows, through the experts, weighted, and summed back.
  std::vector<int64_t> token_of_row(r.slot_of_row.size());
  for (size_t i = 0; i < token_of_row.size(); ++i) token_of_row[i] = r.slot_of_row[i] / k;
  const Tensor tokens = indices(token_of_row, x.device());
  const Tensor xs = trident::embedding(xf, tokens);
  const Tensor ys = [&] {
    if (!dispatch_) return run_experts(xs, r.offsets, 0);
    std::vector<int64_t> counts(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) counts[static_cast<size_t>(e)] = r.kept(e);
    return dispatch_->run(xs, counts, [this, first = dispatch_->first()](const Tensor& rows,
                                                                        const std::vector<int64_t>& offsets) {
      return run_experts(rows, offsets, first);
    });
  }();
  const Tensor row_weights = trident::embedding(weights, indices(r.slot_of_row, x.device()));
  Tensor y = trident::scatter_add_rows(ys * row_weights, tokens, N);
  if (shared_expert_)
    y = y + sigmoid(shared_expert_gate_->forward(xf)) * shared_expert_->forward(xf);

  if (aux_ != nullptr && N > 0) {
    // Note [The load-balancing loss]: E sum_e f_e P_e, f the constant share of choices.
    std::vector<float> share(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) share[static_cast<size_t>(e)] = static_cast<float>(r.routed[static_cast<size_t>(e)]) / static_cast<float>(std::max<int64_t>(N, 1));
    Tensor f = from_vector(share, {E});
    if (!x.device().is_cpu()) f = core::to_device(f, x.device());
    const Tensor balance = trident::sum(trident::mean(probs, {0}) * f) * static_cast<double>(E);
    // logsumexp(logits) = logits_0 - log_softmax(logits)_0: stable, and its gradient is softmax.
    const Tensor lse = trident::narrow(logits32, 1, 0, 1) - trident::narrow(trident::log_softmax(logits32, -1), 1, 0, 1);
    const Tensor z = trident::mean(lse * lse);
    const double layers = static_cast<double>(cfg_.moe_layers);
    y = aux_->add_loss("moe_aux_loss", y, balance, cfg_.aux_loss_coef / layers, layer_);
    y = aux_->add_loss("moe_z_loss", y, z, cfg_.z_loss_coef / layers, layer_);
    aux_->add_metric("moe_dropped", static_cast<double>(r.dropped));
    const int64_t busiest = *std::max_element(r.routed.begin(), r.routed.end());
    aux_->add_metric("moe_max_load", static_cast<double>(busiest) / static_cast<double>(std::max<int64_t>(N * k, 1)));
    const std::vector<double> routed(r.routed.begin(), r.routed.end()), dropped = {static_cast<double>(r.dropped)};
    aux_->add_layer_sums(layer_, "moe_tokens", routed);
    aux_->add_layer_sums(layer_, "moe_dropped", dropped);
  }
  y = trident::reshape(y, x.shape().span());
  return scope_ ? scope_->leave(y) : y;
}

}  // namespace trident::moe
