#include "models/llama/family.h"

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "models/llama/model.h"
#include "models/llama/shapes.h"
#include "ops/loss.h"

namespace trident::models::llama {
namespace {

// The sliding window of every layer (0: none). Mistral: "sliding_window" (null or absent: none;
// Llama's config has no such field, and a window there is ignored, but not a negative one).
// Qwen2 windows layers >= max_window_layers when use_sliding_window is true: all layers
// (max_window_layers 0) or none are implemented.
int64_t sliding_window(const nlohmann::json& j, const std::string& type, const std::string& where) {
  const bool present = j.contains("sliding_window") && !j.at("sliding_window").is_null();
  if (!present) return 0;
  hf_config_value(j.at("sliding_window"), "sliding_window", "llama", "sliding_window", where);  // TOML's checks
  if (type == "llama") return 0;
  TRI_CHECK(j.at("sliding_window").is_number_integer() && j.at("sliding_window").get<int64_t>() >= 1, where,
            ": sliding_window ", j.at("sliding_window").dump(), " must be a positive integer or null");
  const int64_t window = j.at("sliding_window").get<int64_t>();
  if (type != "qwen2" && type != "qwen2_moe") return window;
  if (!j.value("use_sliding_window", false)) return 0;
  const int64_t layers = j.value("num_hidden_layers", int64_t{0}), from = j.value("max_window_layers", layers);
  if (from >= layers) return 0;
  TRI_CHECK(from == 0, where, ": use_sliding_window with max_window_layers ", from, " of ", layers,
            " windows only some layers; trident implements a window on every layer (max_window_layers 0) or none");
  return window;
}

// Mixtral's and Qwen2-MoE's sparse MLP as [model] keys (none for the dense types). The load-balancing
// loss's coefficient is router_aux_loss_coef only where output_router_logits is true: otherwise
// transformers trains such a model without the loss, and so does trident.
void moe_from_hf(const nlohmann::json& j, const std::string& type, const std::string& where,
                 std::map<std::string, OptionValue>& values) {
  if (type != "mixtral" && type != "qwen2_moe") return;
  const bool mixtral = type == "mixtral";
  // config.json's `json_key` as the [model] key `key` (hf_config_value: its type and range), or
  // transformers' default when absent or null.
  auto field = [&](const char* json_key, const char* key, OptionValue fallback) {
    if (!j.contains(json_key) || j.at(json_key).is_null()) return fallback;
    return hf_config_value(j.at(json_key), json_key, "llama", key, where);
  };
  auto integer = [&](const char* json_key, const char* key, int64_t fallback) {
    return std::get<int64_t>(field(json_key, key, fallback));
  };
  auto boolean = [&](const char* json_key, const char* key, bool fallback) {
    return std::get<bool>(field(json_key, key, fallback));
  };
  const int64_t experts = integer(mixtral ? "num_local_experts" : "num_experts", "num_local_experts", mixtral ? 8 : 60);
  const int64_t top_k = integer("num_experts_per_tok", "num_experts_per_tok", mixtral ? 2 : 4);
  TRI_CHECK(experts >= 1, where, ": \"", mixtral ? "num_local_experts" : "num_experts", "\" = ", experts,
            " is invalid: allowed: >= 1");
  TRI_CHECK(top_k <= experts, where, ": num_experts_per_tok ", top_k, " exceeds the ", experts, " experts");
  TRI_CHECK(!j.contains("router_jitter_noise") || j.at("router_jitter_noise").is_null() ||
                (j.at("router_jitter_noise").is_number() && j.at("router_jitter_noise").get<double>() == 0.0),
            where, ": router_jitter_noise ", j.value("router_jitter_noise", nlohmann::json()).dump(),
            " (multiplicative noise on the router's input) is not implemented: allowed: 0 or null");
  values["num_local_experts"] = experts;
  values["num_experts_per_tok"] = top_k;
  const bool output_router_logits = j.contains("output_router_logits") && j.at("output_router_logits").is_boolean() &&
                                    j.at("output_router_logits").get<bool>();
  values["router_aux_loss_coef"] =
      output_router_logits ? std::get<double>(field("router_aux_loss_coef", "router_aux_loss_coef", 0.001)) : 0.0;
  if (mixtral) {  // every layer sparse; intermediate_size is each expert's width
    values["moe_intermediate_size"] = std::get<int64_t>(values.at("intermediate_size"));
    return;
  }
  values["moe_intermediate_size"] = integer("moe_intermediate_size", "moe_intermediate_size", 1408);
  values["shared_expert_intermediate_size"] =
      integer("shared_expert_intermediate_size", "shared_expert_intermediate_size", 5632);
  values["norm_topk_prob"] = boolean("norm_topk_prob", "norm_topk_prob", false);
  values["decoder_sparse_step"] = integer("decoder_sparse_step", "decoder_sparse_step", 1);
  TRI_CHECK(!j.contains("mlp_only_layers") || j.at("mlp_only_layers").is_null() ||
                (j.at("mlp_only_layers").is_array() && j.at("mlp_only_layers").empty()),
            where, ": mlp_only_layers ", j.value("mlp_only_layers", nlohmann::json()).dump(),
            " is not implemented (dense layers by decoder_sparse_step are)");
}

// A LlamaConfig / MistralConfig / Qwen2Config as the [model] section, refusing what this
// family does not implement (rather than training another model than the file describes).
// Each field is checked as the [model] key it sets (hf_config_value).
ModelConfig from_hf(const std::string& text, const std::string& where) {
  const nlohmann::json j = nlohmann::json::parse(text);
  auto present = [](const nlohmann::json& obj, const std::string& key) {
    return obj.contains(key) && !obj.at(key).is_null();
  };
  // A field of `obj` by its path from the top ("rope_scaling.factor"), as the [model] key `key`.
  auto leaf = [](const std::string& json_key) { return json_key.substr(json_key.rfind('.') + 1); };
  auto value = [&](const nlohmann::json& obj, const std::string& json_key, const char* key) {
    return hf_config_value(obj.at(leaf(json_key)), json_key, "llama", key, where);
  };
  auto need = [&](const char* json_key, const char* key) {
    TRI_CHECK(present(j, json_key), where, ": \"", json_key, "\" (an integer) is missing");
    return std::get<int64_t>(value(j, json_key, key));
  };
  // A size config.json must give as at least 1 (0 means "derive it" only in a TOML config).
  auto positive = [&](const char* json_key, int64_t v) {
    TRI_CHECK(v >= 1, where, ": \"", json_key, "\" = ", v, " is invalid: allowed: >= 1");
    return v;
  };
  auto number = [&](const nlohmann::json& obj, const std::string& json_key, const char* key, double fallback) {
    return present(obj, leaf(json_key)) ? std::get<double>(value(obj, json_key, key)) : fallback;
  };
  const std::string type = j.at("model_type").get<std::string>();
  TRI_CHECK(j.value("hidden_act", std::string("silu")) == "silu", where, ": hidden_act \"", j.value("hidden_act", ""),
            "\": the LLaMA family's MLP is SwiGLU (silu)");
  // rope_scaling: none, or Llama 3's (the only type implemented: the others change more than the
  // frequencies, e.g. YaRN's attention factor).
  double factor = 0.0, low = 1.0, high = 4.0;
  int64_t original = 8192;
  if (present(j, "rope_scaling")) {
    const nlohmann::json& r = j.at("rope_scaling");
    TRI_CHECK(r.is_object(), where, ": rope_scaling ", r.dump(),
              " is invalid: expected null or an object {\"rope_type\": \"llama3\", \"factor\": ...}");
    const nlohmann::json type_of = r.contains("rope_type") ? r.at("rope_type") : r.value("type", nlohmann::json());
    const std::string type = type_of.is_string() ? type_of.get<std::string>() : type_of.dump();
    TRI_CHECK(type == "llama3", where, ": rope_scaling ", r.dump(), " is of type \"", type,
              "\"; trident implements \"llama3\"");
    TRI_CHECK(present(r, "factor"), where, ": rope_scaling ", r.dump(), " has no \"factor\"");
    factor = std::get<double>(value(r, "rope_scaling.factor", "rope_scaling_factor"));
    TRI_CHECK(factor > 0, where, ": \"rope_scaling.factor\" = ", factor,
              " is invalid: allowed: > 0 (Llama 3's scaling; null rope_scaling is none)");
    low = number(r, "rope_scaling.low_freq_factor", "rope_low_freq_factor", 1.0);
    high = number(r, "rope_scaling.high_freq_factor", "rope_high_freq_factor", 4.0);
    if (present(r, "original_max_position_embeddings"))
      original = std::get<int64_t>(
          value(r, "rope_scaling.original_max_position_embeddings", "rope_original_max_position"));
  }
  TRI_CHECK(!j.value("attention_bias", false) && !j.value("mlp_bias", false), where,
            ": attention_bias / mlp_bias on every projection is not implemented (Qwen2's q/k/v biases are)");
  const int64_t positions = need("max_position_embeddings", "block_size");
  const int64_t window = sliding_window(j, type, where);
  ModelConfig c;
  c.arch = "llama";
  c.n_layer = need("num_hidden_layers", "n_layer");
  c.n_head = need("num_attention_heads", "n_head");
  c.n_embd = need("hidden_size", "n_embd");
  if (present(j, "head_dim")) {
    TRI_CHECK(j.at("head_dim").is_number_integer(), where, ": \"head_dim\" = ", j.at("head_dim").dump(),
              " is invalid: expected an integer or null");
    TRI_CHECK(j.at("head_dim").get<int64_t>() * c.n_head == c.n_embd, where, ": head_dim ", j.at("head_dim").dump(),
              " is not hidden_size / num_attention_heads (", c.n_embd, " / ", c.n_head, "): not implemented");
  }
  c.block_size = positions;
  c.vocab_size = need("vocab_size", "vocab_size");
  c.init_std = number(j, "initializer_range", "init_std", 0.02);
  int64_t kv_heads = c.n_head;
  if (present(j, "num_key_value_heads"))
    kv_heads = positive("num_key_value_heads", std::get<int64_t>(value(j, "num_key_value_heads", "n_kv_heads")));
  bool tied = false;
  if (present(j, "tie_word_embeddings"))
    tied = std::get<bool>(value(j, "tie_word_embeddings", "tie_word_embeddings"));
  const int64_t hidden = positive("intermediate_size", need("intermediate_size", "intermediate_size"));
  c.family_values = {{"n_kv_heads", kv_heads},
                     {"intermediate_size", hidden},
                     {"rope_theta", number(j, "rope_theta", "rope_theta", 10000.0)},
                     {"rope_scaling_factor", factor},
                     {"rope_low_freq_factor", low},
                     {"rope_high_freq_factor", high},
                     {"rope_original_max_position", original},
                     {"rms_norm_eps", number(j, "rms_norm_eps", "rms_norm_eps", 1e-6)},
                     {"tie_word_embeddings", tied},
                     {"qkv_bias", type == "qwen2" || type == "qwen2_moe"},
                     {"sliding_window", window < positions ? window : int64_t{0}}};
  moe_from_hf(j, type, where, c.family_values);
  return c;  // model_config_from_hf validates it
}

FamilyKey key(std::string name, std::string doc, OptionType type, OptionValue value, Range range = {}) {
  return {OptionField{std::move(name), std::move(doc), type, range, {}, {}, nullptr, nullptr}, std::move(value)};
}

}  // namespace

ModelFamily family() {
  ModelFamily f;
  f.arch = "llama";
  f.doc = "LLaMA: RMSNorm, RoPE, grouped-query attention, SwiGLU (Hugging Face LlamaForCausalLM; Mistral and "
          "Qwen2 by config)";
  f.keys = {
      key("n_kv_heads", "key/value heads, dividing n_head (grouped-query attention); 0: n_head", OptionType::kInt,
          int64_t{0}, Range::non_negative()),
      key("intermediate_size", "the SwiGLU MLP's hidden width; 0: 8/3 n_embd rounded up to a multiple of 256",
          OptionType::kInt, int64_t{0}, Range::non_negative()),
      key("rope_theta", "RoPE's base (10000; Llama 3: 500000)", OptionType::kFloat, 10000.0, Range::positive()),
      key("rope_scaling_factor", "Llama 3's RoPE scaling (rope_scaling type llama3): factor; 0: none",
          OptionType::kFloat, 0.0, Range::non_negative()),
      key("rope_low_freq_factor", "Llama 3's RoPE scaling: low_freq_factor", OptionType::kFloat, 1.0, Range::positive()),
      key("rope_high_freq_factor", "Llama 3's RoPE scaling: high_freq_factor", OptionType::kFloat, 4.0,
          Range::positive()),
      key("rope_original_max_position", "Llama 3's RoPE scaling: original_max_position_embeddings",
          OptionType::kInt, int64_t{8192}, Range::at_least(1)),
      key("rms_norm_eps", "RMSNorm epsilon", OptionType::kFloat, 1e-6, Range::positive()),
      key("tie_word_embeddings", "the LM head is the token embedding", OptionType::kBool, false),
      key("qkv_bias", "biases on the q, k and v projections (Qwen2)", OptionType::kBool, false),
      key("sliding_window", "Mistral's sliding-window attention: each query sees the last sliding_window keys; 0: all",
          OptionType::kInt, int64_t{0}, Range::non_negative()),
      key("num_local_experts", "experts of each mixture-of-experts MLP (Mixtral); 0: dense MLPs", OptionType::kInt,
          int64_t{0}, Range::non_negative()),
      key("num_experts_per_tok", "experts each token is routed to (top-k)", OptionType::kInt, int64_t{2},
          Range::at_least(1)),
      key("moe_intermediate_size", "each expert's SwiGLU width; 0: intermediate_size", OptionType::kInt, int64_t{0},
          Range::non_negative()),
      key("shared_expert_intermediate_size", "a shared expert every token goes through, sigmoid-gated (Qwen2-MoE); 0: none",
          OptionType::kInt, int64_t{0}, Range::non_negative()),
      key("norm_topk_prob", "renormalise each token's k routing weights to sum to 1 (Mixtral: true; Qwen2-MoE: false)",
          OptionType::kBool, true),
      key("decoder_sparse_step", "layer i has a mixture of experts when (i + 1) % decoder_sparse_step == 0",
          OptionType::kInt, int64_t{1}, Range::at_least(1)),
      key("router_aux_loss_coef", "coefficient of the load-balancing loss (mean over MoE layers)", OptionType::kFloat,
          0.001, Range::non_negative()),
      key("router_z_loss_coef", "coefficient of the router z-loss (ST-MoE; mean over MoE layers)", OptionType::kFloat,
          0.0, Range::non_negative()),
      key("moe_capacity_factor", "expert capacity = factor x tokens x k / experts, extra tokens dropped; 0: dropless",
          OptionType::kFloat, 0.0, Range::non_negative()),
  };
  f.validate = [](const ModelConfig& cfg) { LlamaConfig::from(cfg).validate(); };
  f.check_tensor_parallel = [](const ModelConfig& cfg, int64_t tp) { LlamaConfig::from(cfg).check_tensor_parallel(tp); };
  f.build = [](const ModelConfig& cfg) -> std::unique_ptr<CausalLM> {
    return std::make_unique<Llama>(LlamaConfig::from(cfg));
  };
  f.hf_model_types = {"llama", "mistral", "qwen2", "mixtral", "qwen2_moe"};
  f.from_hf_config = from_hf;
  f.to_hf_config = [](const ModelConfig& cfg) { return hf_config_json(LlamaConfig::from(cfg)); };
  f.hf_name = [](const ModelConfig&, const std::string& name) {
    return name.starts_with("lm_head.") ? name : "model." + name;
  };
  // The step's GEMMs (calibrate's and the MFU's shapes): a mixture's layers run their router and
  // each expert's products on the rows routed to it (N k / E with balanced routing, where a
  // dense layer's MLP runs all N), and the head in the fused loss's host chunks.
  f.gemm_shapes = [](const ModelConfig& model, int64_t B, int64_t T) {
    const LlamaConfig c = LlamaConfig::from(model);
    const int64_t C = c.n_embd, Q = c.n_head * c.head_size(), KV = c.n_kv_heads * c.head_size(), I = c.intermediate_size;
    const int64_t L = c.n_layer, sparse = c.sparse_layers(), N = B * T;
    std::vector<kernels::cpu::GemmShape> shapes;
    auto add = [&](const char* name, int64_t in, int64_t out, int64_t count, int64_t rows) {
      kernels::cpu::append_linear_gemm_shapes(shapes, name, in, out, count, rows, /*in_out=*/false);
    };
    add("q_proj", C, Q, L, N);
    add("k_proj", C, KV, L, N);
    add("v_proj", C, KV, L, N);
    add("o_proj", Q, C, L, N);
    add("gate_proj", C, I, L - sparse, N);
    add("up_proj", C, I, L - sparse, N);
    add("down_proj", I, C, L - sparse, N);
    if (sparse > 0) {
      const int64_t E = c.num_local_experts, EI = c.expert_intermediate(), SI = c.shared_expert_intermediate_size;
      const int64_t rows = std::max<int64_t>(1, N * c.num_experts_per_tok / E);
      add("router", C, E, sparse, N);
      add("experts.gate_proj", C, EI, sparse * E, rows);
      add("experts.up_proj", C, EI, sparse * E, rows);
      add("experts.down_proj", EI, C, sparse * E, rows);
      if (SI > 0) {
        add("shared_expert.gate_proj", C, SI, sparse, N);
        add("shared_expert.up_proj", C, SI, sparse, N);
        add("shared_expert.down_proj", SI, C, sparse, N);
        add("shared_expert_gate", C, 1, sparse, N);
      }
    }
    kernels::cpu::append_head_gemm_shapes(shapes, C, c.vocab_size, N, ops::linear_cross_entropy_chunk_rows(c.vocab_size, false));
    return shapes;
  };
  f.shapes = [](const ModelConfig& cfg) { return model_shapes(LlamaConfig::from(cfg)); };
  return f;
}

}  // namespace trident::models::llama
