#include "models/llama/model.h"

#include <algorithm>
#include <sstream>

#include "autograd/functions.h"
#include "core/factory.h"
#include "models/block_stack.h"
#include "nn/init.h"

namespace trident::models::llama {

Attention::Attention(const LlamaConfig& cfg)
    : cfg_(cfg),
      q_proj_(register_module("q_proj", std::make_shared<nn::Linear>(cfg.n_embd, cfg.n_head * cfg.head_size(), cfg.qkv_bias))),
      k_proj_(register_module("k_proj",
                              std::make_shared<nn::Linear>(cfg.n_embd, cfg.n_kv_heads * cfg.head_size(), cfg.qkv_bias))),
      v_proj_(register_module("v_proj",
                              std::make_shared<nn::Linear>(cfg.n_embd, cfg.n_kv_heads * cfg.head_size(), cfg.qkv_bias))),
      o_proj_(register_module("o_proj", std::make_shared<nn::Linear>(cfg.n_head * cfg.head_size(), cfg.n_embd, false))) {}

Tensor Attention::forward(const Tensor& x, const ops::Documents* documents, KvCacheAccess* cache,
                          int64_t layer) const {
  const int64_t HS = cfg_.head_size();
  const Tensor q = q_proj_->forward(x), k = k_proj_->forward(x), v = v_proj_->forward(x);
  // Head counts from the projections' widths: a plan that splits them leaves each rank its heads.
  const int64_t B = q.size(0), T = q.size(1), NH = q.size(2) / HS, NKV = k.size(2) / HS;
  // (B,T,H,HS) per head, rotated tokens-first (ops/rope.h), then (B,H,T,HS) views for attention.
  // Packed documents: positions restart at each one.
  const Tensor* positions = cache ? &cache->positions() : documents ? &documents->positions : nullptr;
  auto rotate = [&](const Tensor& heads) {
    return positions ? trident::rope(heads, cfg_.rope, *positions) : trident::rope(heads, cfg_.rope);
  };
  const Tensor qr = rotate(trident::view(q, {B, T, NH, HS}));
  const Tensor kr = rotate(trident::view(k, {B, T, NKV, HS}));
  const Tensor vh = trident::view(v, {B, T, NKV, HS});
  // Tokens-first output: merging heads back into (B,T,C) is a free view (Note [Attention
  // output layout] in ops/attention.h).
  const Tensor y = [&] {
    if (cache == nullptr)
      return trident::attention(trident::transpose(qr, 1, 2), trident::transpose(kr, 1, 2),
                                trident::transpose(vh, 1, 2), /*causal=*/true, std::nullopt,
                                ops::AttentionOutputLayout::kTokensFirst, cfg_.sliding_window, documents);
    // Decoding: the new keys and values join the cached ones.
    return cache->attend(layer, trident::transpose(qr, 1, 2), kr, vh, cfg_.sliding_window);
  }();
  return o_proj_->forward(trident::view(trident::transpose(y, 1, 2), {B, T, NH * HS}));
}

MLP::MLP(const LlamaConfig& cfg)
    : gate_proj_(register_module("gate_proj", std::make_shared<nn::Linear>(cfg.n_embd, cfg.intermediate_size, false))),
      up_proj_(register_module("up_proj", std::make_shared<nn::Linear>(cfg.n_embd, cfg.intermediate_size, false))),
      down_proj_(register_module("down_proj", std::make_shared<nn::Linear>(cfg.intermediate_size, cfg.n_embd, false))) {}

Tensor MLP::forward(const Tensor& x) const {
  // silu(gate) * up fused: one pass each way, silu(gate) not kept (Note [SwiGLU saves its inputs]).
  return down_proj_->forward(trident::swiglu(gate_proj_->forward(x), up_proj_->forward(x)));
}

moe::MoeConfig moe_config(const LlamaConfig& cfg) {
  moe::MoeConfig m;
  m.hidden = cfg.n_embd;
  m.experts = cfg.num_local_experts;
  m.top_k = cfg.num_experts_per_tok;
  m.expert_intermediate = cfg.expert_intermediate();
  m.shared_intermediate = cfg.shared_expert_intermediate_size;
  m.norm_topk_prob = cfg.norm_topk_prob;
  m.capacity_factor = cfg.moe_capacity_factor;
  m.aux_loss_coef = cfg.router_aux_loss_coef;
  m.z_loss_coef = cfg.router_z_loss_coef;
  m.moe_layers = std::max<int64_t>(cfg.sparse_layers(), 1);
  // Qwen2-MoE is the sparse Qwen2 (q/k/v biases); Mixtral the sparse Mistral.
  m.naming = cfg.qkv_bias ? moe::MoeNaming::kQwen2Moe : moe::MoeNaming::kMixtral;
  return m;
}

// The sparse layer's module name: Mixtral's, or Qwen2-MoE's (which is the dense MLP's too).
static const char* sparse_module_name(const LlamaConfig& cfg) {
  return moe_config(cfg).naming == moe::MoeNaming::kMixtral ? "block_sparse_moe" : "mlp";
}

Block::Block(const LlamaConfig& cfg, int64_t layer, nn::AuxOutputs* aux)
    : input_layernorm_(register_module("input_layernorm", std::make_shared<nn::RMSNorm>(cfg.n_embd, cfg.rms_norm_eps))),
      self_attn_(register_module("self_attn", std::make_shared<Attention>(cfg))),
      post_attention_layernorm_(
          register_module("post_attention_layernorm", std::make_shared<nn::RMSNorm>(cfg.n_embd, cfg.rms_norm_eps))) {
  if (!cfg.sparse_layer(layer)) {
    mlp_ = register_module("mlp", std::make_shared<MLP>(cfg));
  } else {
    moe_ = register_module(sparse_module_name(cfg), std::make_shared<moe::SparseMoe>(moe_config(cfg), aux, layer));
  }
}

Tensor Block::forward(const Tensor& x, const ops::Documents* documents, KvCacheAccess* cache, int64_t layer) const {
  const Tensor h = x + self_attn_->forward(input_layernorm_->forward(x), documents, cache, layer);
  const Tensor n = post_attention_layernorm_->forward(h);
  return h + (moe_ ? moe_->forward(n) : mlp_->forward(n));
}

Llama::Llama(const LlamaConfig& cfg)
    : cfg_(cfg), model_config_(cfg.to_model_config()), dropout_gen_(static_cast<uint64_t>(cfg.init_seed) + 1) {
  cfg_.validate();
  embed_tokens_ = register_module("embed_tokens", std::make_shared<nn::Embedding>(cfg.vocab_size, cfg.n_embd));
  for (int64_t i = 0; i < cfg.n_layer; ++i)
    layers_.push_back(register_module("layers." + std::to_string(i), std::make_shared<Block>(cfg, i, &aux_outputs())));
  norm_ = register_module("norm", std::make_shared<nn::RMSNorm>(cfg.n_embd, cfg.rms_norm_eps));
  if (!cfg.tie_word_embeddings)
    lm_head_ = register_module("lm_head", std::make_shared<nn::Linear>(cfg.n_embd, cfg.vocab_size, false));
  init_weights();
}

void Llama::init_weights() {
  // Hugging Face's LlamaPreTrainedModel._init_weights: N(0, initializer_range) for every matrix
  // and embedding, zero biases, unit norms. Registration order fixes the draws.
  autograd::NoGradGuard no_grad;
  Generator gen(static_cast<uint64_t>(cfg_.init_seed));
  for (auto& [name, p] : named_parameters()) {
    if (name.ends_with("norm.weight")) nn::init_constant_(p, 1.0);
    else if (name.ends_with(".bias")) nn::init_constant_(p, 0.0);
    else nn::init_normal_(p, gen, 0.0, cfg_.init_std);
  }
}

Tensor Llama::embed(const Tensor& idx, const ops::Documents* documents) const {
  TRI_CHECK(idx.dim() == 2, "Llama: expected token ids of shape (B, T), got ", idx.shape());
  TRI_CHECK(idx.size(1) <= cfg_.block_size, "Llama: sequence length ", idx.size(1),
            " exceeds the context length block_size=", cfg_.block_size);
  check_documents(documents, idx, "Llama");
  return embed_tokens_->forward(idx);
}

Tensor Llama::run_blocks(const Tensor& x, int64_t begin, int64_t end, const ops::Documents* documents) const {
  TRI_CHECK(0 <= begin && begin <= end && end <= static_cast<int64_t>(layers_.size()), "Llama: blocks [", begin, ", ",
            end, ") out of range for ", layers_.size(), " layers");
  // A copy: a checkpointed block reruns in the backward, after the caller's documents may be gone.
  const std::optional<ops::Documents> docs = documents ? std::optional(*documents) : std::nullopt;
  return run_block_stack([this, docs](int64_t i, const Tensor& in) {
                           return layers_[static_cast<size_t>(i)]->forward(in, docs ? &*docs : nullptr);
                         },
                         begin, end, x, cfg_.activation_checkpointing, is_training(), nullptr, part_hooks_);
}

Tensor Llama::head_loss(const Tensor& x, const Tensor& targets) const {
  // The LM head fused with the loss: the (B,T,V) logits never exist (ops/loss.h).
  const Tensor h = norm_->forward(x), t = trident::reshape(targets, {-1});
  return lm_head_ ? lm_head_->loss(h, t) : embed_tokens_->attend_loss(h, t);
}

Tensor Llama::hidden(const Tensor& idx, const ops::Documents* documents) const {
  return norm_->forward(run_blocks(embed(idx, documents), 0, static_cast<int64_t>(layers_.size()), documents));
}

Tensor Llama::forward(const Tensor& idx, const ops::Documents* documents) const {
  return nn::run_part(
      part_hooks_, 0,
      [&](const Tensor& ids) {
        const Tensor h = hidden(ids, documents);
        return lm_head_ ? lm_head_->forward(h) : embed_tokens_->attend(h);
      },
      idx);
}

Tensor Llama::loss(const Tensor& idx, const Tensor& targets, const ops::Documents* documents) const {
  return nn::run_part(
      part_hooks_, 0,
      [&](const Tensor& ids) {
        return head_loss(run_blocks(embed(ids, documents), 0, static_cast<int64_t>(layers_.size()), documents),
                         targets);
      },
      idx);
}

Tensor Llama::decode(const Tensor& idx, KvCacheAccess& cache) const {
  TRI_CHECK(idx.dim() == 2, "Llama: expected token ids of shape (B, T), got ", idx.shape());
  Tensor x = embed_tokens_->forward(idx);
  for (size_t i = 0; i < layers_.size(); ++i) x = layers_[i]->forward(x, nullptr, &cache, static_cast<int64_t>(i));
  const Tensor last = trident::narrow(norm_->forward(x), 1, idx.size(1) - 1, 1);
  const Tensor logits = lm_head_ ? lm_head_->forward(last) : embed_tokens_->attend(last);
  return trident::reshape(logits, {idx.size(0), -1});
}

int64_t Llama::block_of(const std::string& name) const {
  if (name.starts_with("layers.")) return std::stoll(name.substr(7, name.find('.', 7) - 7));
  if (name.starts_with("norm.") || name.starts_with("lm_head.")) return kHead;
  TRI_CHECK(name.starts_with("embed_tokens."), "Llama: no parameter '", name, "'");
  return kEmbedding;
}

int64_t Llama::expert_of(const std::string& name) const {
  // layers.N.{block_sparse_moe,mlp}.experts.M.<layer>.weight
  const size_t at = name.find(".experts.");
  if (at == std::string::npos || !name.starts_with("layers.")) return -1;
  const size_t begin = at + 9, end = name.find('.', begin);
  return std::stoll(name.substr(begin, end - begin));
}

std::optional<std::string> Llama::tied_head_weight() const {
  if (lm_head_) return std::nullopt;
  return "embed_tokens.weight";
}

nn::ParallelPlan Llama::parallel_plan(int64_t tp) const {
  namespace style = nn::tp_style;
  // k and v: split when the ranks divide the kv heads, else each rank computes the one head
  // its query heads read (check_tensor_parallel: then tp is a multiple of n_kv_heads).
  const bool split_kv = cfg_.n_kv_heads % tp == 0;
  const char* kv = split_kv ? style::kColumnwise : style::kColumnwiseReplicated;
  nn::ParallelPlan plan = {
      {"layers.*.self_attn.q_proj", style::kColumnwise},
      {"layers.*.self_attn.k_proj", kv, 1, cfg_.n_kv_heads},
      {"layers.*.self_attn.v_proj", kv, 1, cfg_.n_kv_heads},
      {"layers.*.self_attn.o_proj", style::kRowwise},
      {"layers.*.input_layernorm", style::kSequenceParallel},
      {"layers.*.post_attention_layernorm", style::kSequenceParallel},
      {"norm", style::kSequenceParallel},
      {"embed_tokens", style::kVocabParallel},  // and the head when tied
  };
  // The dense MLPs, where there are any. A mixture-of-experts layer's router and experts are
  // replicated over tp (Megatron's expert tensor parallelism of 1) and see the whole sequence,
  // gathered by its sequence-parallel style when the ranks split it.
  if (cfg_.sparse_layers() < cfg_.n_layer) {
    plan.push_back({"layers.*.mlp.gate_proj", style::kColumnwise});
    plan.push_back({"layers.*.mlp.up_proj", style::kColumnwise});
    plan.push_back({"layers.*.mlp.down_proj", style::kRowwise});
  }
  for (int64_t i = 0; i < cfg_.n_layer; ++i)
    if (cfg_.sparse_layer(i))
      plan.push_back({"layers." + std::to_string(i) + "." + sparse_module_name(cfg_), style::kSequenceParallel});
  if (lm_head_) plan.push_back({"lm_head", style::kVocabParallel});
  return plan;
}

void Llama::check_tensor_parallel(int64_t tp) const { cfg_.check_tensor_parallel(tp); }

std::optional<std::string> Llama::parameter_name_from_hf(std::string_view hf_name) const {
  std::string_view name = hf_name;
  if (name.starts_with("model.")) name.remove_prefix(6);
  if (name == "lm_head.weight" && !lm_head_) return std::nullopt;  // tied: the embedding's copy
  if (name.ends_with(".self_attn.rotary_emb.inv_freq")) return std::nullopt;  // a buffer in older files
  return std::string(name);
}

std::string Llama::hf_config_json() const { return llama::hf_config_json(cfg_); }

namespace {

// What transformers' Mixtral and Qwen2-MoE can express: throws naming the key otherwise.
void check_hf_moe(const LlamaConfig& cfg) {
  const char* type = cfg.qkv_bias ? "Qwen2-MoE" : "Mixtral";
  if (cfg.qkv_bias) {
    TRI_CHECK(cfg.shared_expert_intermediate_size > 0, "Hugging Face export: model.shared_expert_intermediate_size = 0: ",
              type, " (the sparse model with q/k/v biases) always has a shared expert");
  } else {
    TRI_CHECK(cfg.shared_expert_intermediate_size == 0, "Hugging Face export: model.shared_expert_intermediate_size = ",
              cfg.shared_expert_intermediate_size, ": ", type, " has no shared expert (Qwen2-MoE, with qkv_bias, does)");
    TRI_CHECK(cfg.decoder_sparse_step == 1 && cfg.norm_topk_prob, "Hugging Face export: model.decoder_sparse_step = ",
              cfg.decoder_sparse_step, ", model.norm_topk_prob = ", cfg.norm_topk_prob ? "true" : "false", ": ", type,
              " has experts on every layer (step 1) and renormalised weights (true)");
  }
}

}  // namespace

std::string hf_config_json(const LlamaConfig& cfg) {
  std::ostringstream os;
  os.precision(17);
  // Qwen2 is LLaMA with q/k/v biases, Mistral LLaMA with a sliding window: transformers reads
  // such models as those. With experts: Qwen2-MoE and Mixtral.
  const bool moe = cfg.num_local_experts > 0;
  const bool qwen2 = cfg.qkv_bias, mistral = !qwen2 && cfg.sliding_window > 0;
  if (moe) check_hf_moe(cfg);
  const std::string type = moe ? (qwen2 ? "qwen2_moe" : "mixtral") : qwen2 ? "qwen2" : mistral ? "mistral" : "llama";
  const std::string architecture = moe ? (qwen2 ? "Qwen2MoeForCausalLM" : "MixtralForCausalLM")
                                   : qwen2 ? "Qwen2ForCausalLM" : mistral ? "MistralForCausalLM" : "LlamaForCausalLM";
  os << "{\n"
     << "  \"model_type\": \"" << type << "\",\n"
     << "  \"architectures\": [\"" << architecture << "\"],\n"
     << "  \"num_hidden_layers\": " << cfg.n_layer << ",\n"
     << "  \"num_attention_heads\": " << cfg.n_head << ",\n"
     << "  \"num_key_value_heads\": " << cfg.n_kv_heads << ",\n"
     << "  \"hidden_size\": " << cfg.n_embd << ",\n"
     << "  \"intermediate_size\": " << (moe && !qwen2 ? cfg.expert_intermediate() : cfg.intermediate_size) << ",\n"
     << "  \"max_position_embeddings\": " << cfg.block_size << ",\n"
     << "  \"vocab_size\": " << cfg.vocab_size << ",\n"
     << "  \"rope_theta\": " << cfg.rope.theta << ",\n"
     << "  \"rms_norm_eps\": " << cfg.rms_norm_eps << ",\n"
     << "  \"rope_scaling\": ";
  if (cfg.rope.scaled())
    os << "{\"rope_type\": \"llama3\", \"factor\": " << cfg.rope.factor << ", \"low_freq_factor\": "
       << cfg.rope.low_freq_factor << ", \"high_freq_factor\": " << cfg.rope.high_freq_factor
       << ", \"original_max_position_embeddings\": " << cfg.rope.original_max_position << "}";
  else
    os << "null";
  os << ",\n"
     << "  \"hidden_act\": \"silu\",\n";
  if (moe) {
    os << "  \"" << (qwen2 ? "num_experts" : "num_local_experts") << "\": " << cfg.num_local_experts << ",\n"
       << "  \"num_experts_per_tok\": " << cfg.num_experts_per_tok << ",\n"
       << "  \"output_router_logits\": " << (cfg.router_aux_loss_coef > 0 ? "true" : "false") << ",\n"
       << "  \"router_aux_loss_coef\": " << cfg.router_aux_loss_coef << ",\n";
    if (qwen2)
      os << "  \"moe_intermediate_size\": " << cfg.expert_intermediate() << ",\n"
         << "  \"shared_expert_intermediate_size\": " << cfg.shared_expert_intermediate_size << ",\n"
         << "  \"norm_topk_prob\": " << (cfg.norm_topk_prob ? "true" : "false") << ",\n"
         << "  \"decoder_sparse_step\": " << cfg.decoder_sparse_step << ",\n"
         << "  \"mlp_only_layers\": [],\n";
    else
      os << "  \"router_jitter_noise\": 0.0,\n";
  }
  if (qwen2 && cfg.sliding_window > 0)  // every layer windowed: max_window_layers 0
    os << "  \"use_sliding_window\": true,\n  \"sliding_window\": " << cfg.sliding_window
       << ",\n  \"max_window_layers\": 0,\n";
  else if (qwen2)
    os << "  \"use_sliding_window\": false,\n";
  else if (mistral || (moe && !qwen2))
    os << "  \"sliding_window\": " << (cfg.sliding_window > 0 ? std::to_string(cfg.sliding_window) : "null") << ",\n";
  else
    os << "  \"attention_bias\": false,\n";
  os << "  \"tie_word_embeddings\": " << (cfg.tie_word_embeddings ? "true" : "false") << ",\n"
     << "  \"initializer_range\": " << cfg.init_std << ",\n"
     << "  \"torch_dtype\": \"float32\"\n"
     << "}\n";
  return os.str();
}

}  // namespace trident::models::llama
