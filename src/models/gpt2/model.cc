#include "models/gpt2/model.h"

#include <cmath>

#include "autograd/functions.h"
#include "core/factory.h"
#include "models/block_stack.h"
#include "models/gpt2/hf_names.h"
#include "nn/init.h"

namespace trident::models::gpt2 {
namespace {

Tensor maybe_dropout(const Tensor& x, double p, Generator* gen) {
  return (gen != nullptr && p > 0.0) ? trident::dropout(x, p, *gen) : x;
}

}  // namespace

CausalSelfAttention::CausalSelfAttention(const GPT2Config& cfg)
    : cfg_(cfg),
      c_attn_(register_module("c_attn", std::make_shared<nn::Conv1D>(cfg.n_embd, 3 * cfg.n_embd))),
      c_proj_(register_module("c_proj", std::make_shared<nn::Conv1D>(cfg.n_embd, cfg.n_embd))) {}

Tensor CausalSelfAttention::forward(const Tensor& x, Generator* dropout_gen, const ops::Documents* documents,
                                    KvCacheAccess* cache, int64_t layer) const {
  const Tensor qkv = c_attn_->forward(x);  // (B,T,3C)
  // Sizes from qkv rather than x and the config: under tensor parallelism c_attn yields this
  // rank's heads only, and with sequence parallelism x is this rank's part of the sequence
  // while qkv is all of it (parallel/tensor_parallel.h); the same code runs them.
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, HS = cfg_.n_embd / cfg_.n_head, NH = C / HS;
  // q, k, v: (B,NH,T,HS) views into qkv; the attention kernel reads them through strides.
  // One split rather than three narrows: its backward concatenates dq, dk, dv into one
  // gradient, where each narrow's would zero a (B,T,3C) tensor and the three be summed.
  const std::vector<Tensor> parts = trident::split(qkv, {C, C, C}, 2);
  auto head_view = [&](int64_t which) {
    return trident::transpose(trident::view(parts[static_cast<size_t>(which)], {B, T, NH, HS}), 1, 2);
  };
  // Tokens-first output: merging heads back into (B,T,C) is a free view.
  // See Note [Attention output layout] in ops/attention.h.
  const Tensor y = [&] {
    if (cache == nullptr)
      return trident::attention(head_view(0), head_view(1), head_view(2), /*causal=*/true, std::nullopt,
                                ops::AttentionOutputLayout::kTokensFirst, 0, documents);
    // Decoding: the new keys and values join the cached ones.
    auto tokens_first = [&](int64_t which) { return trident::view(parts[static_cast<size_t>(which)], {B, T, NH, HS}); };
    return cache->attend(layer, head_view(0), tokens_first(1), tokens_first(2), /*window=*/0);
  }();
  const Tensor merged = trident::view(trident::transpose(y, 1, 2), {B, T, C});
  return maybe_dropout(c_proj_->forward(merged), cfg_.dropout, dropout_gen);
}

MLP::MLP(const GPT2Config& cfg)
    : cfg_(cfg),
      c_fc_(register_module("c_fc", std::make_shared<nn::Conv1D>(cfg.n_embd, 4 * cfg.n_embd))),
      c_proj_(register_module("c_proj", std::make_shared<nn::Conv1D>(4 * cfg.n_embd, cfg.n_embd))) {}

Tensor MLP::forward(const Tensor& x, Generator* dropout_gen) const {
  const Tensor h = c_fc_->forward(x, nn::Activation::kGeluTanh);  // one GEMM with a GELU epilogue on a GPU
  return maybe_dropout(c_proj_->forward(h), cfg_.dropout, dropout_gen);
}

Block::Block(const GPT2Config& cfg)
    : ln_1_(register_module("ln_1", std::make_shared<nn::LayerNorm>(cfg.n_embd, cfg.layer_norm_eps))),
      attn_(register_module("attn", std::make_shared<CausalSelfAttention>(cfg))),
      ln_2_(register_module("ln_2", std::make_shared<nn::LayerNorm>(cfg.n_embd, cfg.layer_norm_eps))),
      mlp_(register_module("mlp", std::make_shared<MLP>(cfg))) {}

Tensor Block::forward(const Tensor& x, Generator* dropout_gen, const ops::Documents* documents, KvCacheAccess* cache,
                      int64_t layer) const {
  const Tensor h = x + attn_->forward(ln_1_->forward(x), dropout_gen, documents, cache, layer);
  return h + mlp_->forward(ln_2_->forward(h), dropout_gen);
}

GPT2::GPT2(const GPT2Config& cfg)
    : cfg_(cfg), model_config_(cfg.to_model_config()), dropout_gen_(static_cast<uint64_t>(cfg.init_seed) + 1) {
  cfg_.validate();
  wte_ = register_module("wte", std::make_shared<nn::Embedding>(cfg.vocab_size, cfg.n_embd));
  wpe_ = register_module("wpe", std::make_shared<nn::Embedding>(cfg.block_size, cfg.n_embd));
  for (int64_t i = 0; i < cfg.n_layer; ++i)
    h_.push_back(register_module("h." + std::to_string(i), std::make_shared<Block>(cfg)));
  ln_f_ = register_module("ln_f", std::make_shared<nn::LayerNorm>(cfg.n_embd, cfg.layer_norm_eps));
  init_weights();
}

void GPT2::init_weights() {
  autograd::NoGradGuard no_grad;
  Generator gen(static_cast<uint64_t>(cfg_.init_seed));
  const double residual_std = cfg_.init_std / std::sqrt(2.0 * static_cast<double>(cfg_.n_layer));
  // Registration order is fixed, so the draw order (and the weights) depend only on the seed.
  for (auto& [name, p] : named_parameters()) {
    const bool is_bias = name.ends_with(".bias");
    const bool is_norm = name.find("ln_") != std::string::npos;
    if (is_norm) {
      nn::init_constant_(p, is_bias ? 0.0 : 1.0);
    } else if (is_bias) {
      nn::init_constant_(p, 0.0);
    } else {
      // GPT-2: residual projections (attn.c_proj, mlp.c_proj) scaled by 1/sqrt(2L).
      const bool residual = name.ends_with("c_proj.weight");
      nn::init_normal_(p, gen, 0.0, residual ? residual_std : cfg_.init_std);
    }
  }
}

// Note [Activation checkpointing]
// With model.activation_checkpointing = "full", each block runs inside trident::checkpoint (autograd/functions/
// checkpoint.h): between forward and backward only the block's input (B,T,C) stays alive, and
// the backward reruns the block. "selective" also keeps the outputs of the block's four
// matrix products (qkv, attention projection, MLP up and down: 9 x (B,T,C)), so the rerun
// costs only the norms, the attention kernel and GELU, and frees the norm outputs, the
// attention output and the 4C GELU output. The dropout generator is rewound for the rerun,
// so losses and gradients are bitwise those of "none".
Tensor GPT2::embed(const Tensor& idx, const ops::Documents* documents) const {
  TRI_CHECK(idx.dim() == 2, "GPT2: expected token ids of shape (B, T), got ", idx.shape());
  const int64_t T = idx.size(1);
  TRI_CHECK(T <= cfg_.block_size, "GPT2: sequence length ", T, " exceeds the context length block_size=",
            cfg_.block_size);
  check_documents(documents, idx, "GPT2");
  // Packed documents: each one's positions start at 0 (B,T); else one row of positions (T).
  const Tensor pos = documents ? documents->positions : core::to_device(arange(T, DType::kI64), idx.device());
  const Tensor x = wte_->forward(idx) + wpe_->forward(pos);  // (B,T,C) + (B,T,C) or (T,C)
  return maybe_dropout(x, cfg_.dropout, dropout());
}

Generator* GPT2::dropout() const { return is_training() && cfg_.dropout > 0.0 ? &dropout_gen_ : nullptr; }

Tensor GPT2::run_blocks(const Tensor& x, int64_t begin, int64_t end, const ops::Documents* documents) const {
  TRI_CHECK(0 <= begin && begin <= end && end <= static_cast<int64_t>(h_.size()), "GPT2: blocks [", begin, ", ", end,
            ") out of range for ", h_.size(), " layers");
  Generator* gen = dropout();
  // A copy: a checkpointed block reruns in the backward, after the caller's documents may be gone.
  const std::optional<ops::Documents> docs = documents ? std::optional(*documents) : std::nullopt;
  return run_block_stack([this, gen, docs](int64_t i, const Tensor& in) {
                           return h_[static_cast<size_t>(i)]->forward(in, gen, docs ? &*docs : nullptr);
                         },
                         begin, end, x, cfg_.activation_checkpointing, is_training(), gen, part_hooks_);
}

Tensor GPT2::head_loss(const Tensor& x, const Tensor& targets) const {
  // The tied LM head fused with the loss: the (B,T,V) logits never exist (Note [Fused LM
  // head and cross-entropy] in ops/loss.h).
  return wte_->attend_loss(ln_f_->forward(x), trident::reshape(targets, {-1}));
}

Tensor GPT2::hidden(const Tensor& idx, const ops::Documents* documents) const {
  return ln_f_->forward(run_blocks(embed(idx, documents), 0, static_cast<int64_t>(h_.size()), documents));
}

Tensor GPT2::forward(const Tensor& idx, const ops::Documents* documents) const {
  // LM head tied to wte: logits = x wte^T, one GEMM against the transposed view.
  return nn::run_part(part_hooks_, 0, [&](const Tensor& ids) { return wte_->attend(hidden(ids, documents)); }, idx);
}

Tensor GPT2::loss(const Tensor& idx, const Tensor& targets, const ops::Documents* documents) const {
  return nn::run_part(
      part_hooks_, 0,
      [&](const Tensor& ids) {
        return head_loss(run_blocks(embed(ids, documents), 0, static_cast<int64_t>(h_.size()), documents), targets);
      },
      idx);
}

Tensor GPT2::decode(const Tensor& idx, KvCacheAccess& cache) const {
  TRI_CHECK(idx.dim() == 2, "GPT2: expected token ids of shape (B, T), got ", idx.shape());
  Tensor x = wte_->forward(idx) + wpe_->forward(cache.positions());
  for (size_t i = 0; i < h_.size(); ++i) x = h_[i]->forward(x, nullptr, nullptr, &cache, static_cast<int64_t>(i));
  const Tensor last = trident::narrow(ln_f_->forward(x), 1, idx.size(1) - 1, 1);
  return trident::reshape(wte_->attend(last), {idx.size(0), -1});
}

int64_t GPT2::block_of(const std::string& name) const {
  if (name.starts_with("h.")) return std::stoll(name.substr(2, name.find('.', 2) - 2));
  if (name.starts_with("ln_f.")) return kHead;
  TRI_CHECK(name.starts_with("wte.") || name.starts_with("wpe."), "GPT2: no parameter '", name, "'");
  return kEmbedding;
}

nn::ParallelPlan GPT2::parallel_plan(int64_t) const {
  namespace style = nn::tp_style;
  return {
      {"h.*.attn.c_attn", style::kColumnwise, 3},  // q, k, v side by side: each split by heads
      {"h.*.attn.c_proj", style::kRowwise},
      {"h.*.mlp.c_fc", style::kColumnwise},
      {"h.*.mlp.c_proj", style::kRowwise},
      {"h.*.ln_1", style::kSequenceParallel},
      {"h.*.ln_2", style::kSequenceParallel},
      {"ln_f", style::kSequenceParallel},
      {"wpe", style::kSequenceParallel},
      {"wte", style::kVocabParallel},  // and the tied LM head
  };
}

void GPT2::check_tensor_parallel(int64_t tp) const { cfg_.check_tensor_parallel(tp); }

std::optional<std::string> GPT2::parameter_name_from_hf(std::string_view hf_name) const {
  return gpt2::parameter_name_from_hf(hf_name);
}

std::string GPT2::hf_config_json() const { return gpt2::hf_config_json(cfg_); }

}  // namespace trident::models::gpt2
