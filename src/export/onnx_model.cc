#include "export/onnx_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <numbers>

#include <nlohmann/json.hpp>

#include "core/copy.h"
#include "core/rope_params.h"
#include "export/onnx_graph.h"
#include "models/registry.h"

namespace trident::exporting {

StatusOr<OnnxWeights> parse_onnx_weights(const std::string& value, const std::string& where) {
  std::string v = value;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  if (v == "f32") return OnnxWeights::kF32;
  if (v == "f16") return OnnxWeights::kF16;
  if (v == "int8") return OnnxWeights::kInt8;
  return Status::invalid(where + " \"" + value + "\" is not an ONNX weight type trident writes; allowed: f32, f16, int8");
}

const char* onnx_weights_name(OnnxWeights w) {
  switch (w) {
    case OnnxWeights::kF32: return "f32";
    case OnnxWeights::kF16: return "f16";
    case OnnxWeights::kInt8: return "int8";
  }
  return "?";
}

namespace {

using nlohmann::json;
constexpr int64_t kOpset = 17;
constexpr int64_t kIrVersion = 8;  // opset 17's IR version (onnx 1.12, Debian's python3-onnx)

// A parameter as float32, row-major, under its Hugging Face name.
struct Weight {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// What the graph needs of the config.
struct Dims {
  std::string type;  // "gpt2" or "llama"
  int64_t layers = 0, heads = 0, kv_heads = 0, embd = 0, head_dim = 0, vocab = 0, context = 0;
  double eps = 0;
  RopeParams rope;
  bool qkv_bias = false, tied = true;
};

class DecoderBuilder {
 public:
  DecoderBuilder(OnnxGraph& g, const Dims& d, OnnxWeights w, std::map<std::string, Weight>& weights)
      : g_(g), d_(d), w_(w), weights_(weights) {}

  Status build();

 private:
  StatusOr<const Weight*> get(const std::string& name, const std::vector<int64_t>& shape);
  // An embedding table (rows gathered): float32, or float16 cast back.
  std::string table(const std::string& name, const Weight& t);
  // A linear layer's weight as a float32 value of shape (in, out) for MatMul. `out_in`: stored
  // (out, in) (torch Linear) rather than (in, out) (GPT-2's Conv1D).
  std::string matrix(const std::string& name, const Weight& t, bool out_in);
  StatusOr<std::string> linear(const std::string& x, const std::string& prefix, int64_t in, int64_t out, bool bias,
                               bool out_in);
  StatusOr<std::string> norm(const std::string& x, const std::string& prefix);
  std::string rope(const std::string& x, const std::string& cos, const std::string& sin);
  StatusOr<std::string> attention(const std::string& x, int64_t layer);
  StatusOr<std::string> mlp(const std::string& x, int64_t layer);
  std::string block_prefix(int64_t layer) const {
    return d_.type == "gpt2" ? "h." + std::to_string(layer) + "." : "model.layers." + std::to_string(layer) + ".";
  }

  OnnxGraph& g_;
  const Dims& d_;
  OnnxWeights w_;
  std::map<std::string, Weight>& weights_;
  std::string mask_, cos_, sin_;  // shared by the layers
};

StatusOr<const Weight*> DecoderBuilder::get(const std::string& name, const std::vector<int64_t>& shape) {
  const auto it = weights_.find(name);
  if (it == weights_.end())
    return Status::invalid("export --format onnx: the model has no parameter with the Hugging Face name '" + name +
                           "', which the " + d_.type + " graph reads");
  if (it->second.shape != shape)
    return Status::invalid("export --format onnx: parameter '" + name + "' has shape " + Shape(it->second.shape).str() +
                           "; the " + d_.type + " graph needs " + Shape(shape).str());
  return &it->second;
}

std::string DecoderBuilder::table(const std::string& name, const Weight& t) {
  if (w_ != OnnxWeights::kF16) return g_.floats(name, t.shape, t.data.data());
  return g_.op("Cast", {g_.halves(name, t.shape, t.data.data())}, {{"to", int64_t{onnx::TensorProto::FLOAT}}});
}

std::string DecoderBuilder::matrix(const std::string& name, const Weight& t, bool out_in) {
  const int64_t rows = t.shape[0], cols = t.shape[1];
  // (in, out) for MatMul: torch Linear's (out, in) transposed here, once, rather than in the graph.
  std::vector<float> m = t.data;
  int64_t in = rows, out = cols;
  if (out_in) {
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) m[static_cast<size_t>(j * rows + i)] = t.data[static_cast<size_t>(i * cols + j)];
    in = cols;
    out = rows;
  }
  const std::string stored = out_in ? name + "_transposed" : name;
  if (w_ == OnnxWeights::kF32) return g_.floats(stored, {in, out}, m.data());
  if (w_ == OnnxWeights::kF16)
    return g_.op("Cast", {g_.halves(stored, {in, out}, m.data())}, {{"to", int64_t{onnx::TensorProto::FLOAT}}});
  // int8: symmetric, one scale per output channel (column), zero point 0 (DequantizeLinear's
  // default): x = q * scale.
  std::vector<float> scale(static_cast<size_t>(out), 0.0f);
  for (int64_t i = 0; i < in; ++i)
    for (int64_t j = 0; j < out; ++j) scale[j] = std::max(scale[j], std::fabs(m[static_cast<size_t>(i * out + j)]));
  for (float& s : scale) s = s > 0.0f ? s / 127.0f : 1.0f;
  std::vector<int8_t> q(m.size());
  for (int64_t i = 0; i < in; ++i)
    for (int64_t j = 0; j < out; ++j) {
      const float v = std::nearbyint(m[static_cast<size_t>(i * out + j)] / scale[j]);
      q[static_cast<size_t>(i * out + j)] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
    }
  const std::string qn = g_.int8s(stored + "_quantized", {in, out}, q.data());
  const std::string sn = g_.floats(stored + "_scale", {out}, scale.data());
  return g_.op("DequantizeLinear", {qn, sn}, {{"axis", int64_t{1}}});
}

StatusOr<std::string> DecoderBuilder::linear(const std::string& x, const std::string& prefix, int64_t in, int64_t out,
                                             bool bias, bool out_in) {
  auto w = get(prefix + ".weight", out_in ? std::vector<int64_t>{out, in} : std::vector<int64_t>{in, out});
  if (!w.is_ok()) return w.status();
  std::string y = g_.op("MatMul", {x, matrix(prefix + ".weight", *w.value(), out_in)});
  if (!bias) return y;
  auto b = get(prefix + ".bias", {out});
  if (!b.is_ok()) return b.status();
  return g_.op("Add", {y, g_.floats(prefix + ".bias", {out}, b.value()->data.data())});
}

StatusOr<std::string> DecoderBuilder::norm(const std::string& x, const std::string& prefix) {
  auto w = get(prefix + ".weight", {d_.embd});
  if (!w.is_ok()) return w.status();
  const std::string scale = g_.floats(prefix + ".weight", {d_.embd}, w.value()->data.data());
  if (d_.type == "gpt2") {
    auto b = get(prefix + ".bias", {d_.embd});
    if (!b.is_ok()) return b.status();
    return g_.op("LayerNormalization", {x, scale, g_.floats(prefix + ".bias", {d_.embd}, b.value()->data.data())},
                 {{"axis", int64_t{-1}}, {"epsilon", static_cast<float>(d_.eps)}});
  }
  // RMSNorm as trident's kernel: x * (1 / sqrt(mean(x^2) + eps)) * w.
  const std::string ms = g_.op("ReduceMean", {g_.op("Mul", {x, x})}, {{"axes", std::vector<int64_t>{-1}}, {"keepdims", int64_t{1}}});
  const std::string r = g_.op("Reciprocal", {g_.op("Sqrt", {g_.op("Add", {ms, g_.const_float(static_cast<float>(d_.eps))})})});
  return g_.op("Mul", {g_.op("Mul", {x, r}), scale});
}

std::string DecoderBuilder::rope(const std::string& x, const std::string& cos, const std::string& sin) {
  // Hugging Face's rotate-half: (x1, x2) -> (-x2, x1) over the two halves of each head.
  const int64_t half = d_.head_dim / 2;
  const auto halves = g_.ops("Split", {x, g_.const_ints({half, half})}, 2, {{"axis", int64_t{-1}}});
  const std::string rotated = g_.op("Concat", {g_.op("Neg", {halves[1]}), halves[0]}, {{"axis", int64_t{-1}}});
  return g_.op("Add", {g_.op("Mul", {x, cos}), g_.op("Mul", {rotated, sin})});
}

StatusOr<std::string> DecoderBuilder::attention(const std::string& x, int64_t layer) {
  const std::string p = block_prefix(layer);
  const int64_t C = d_.embd, H = d_.heads, KV = d_.kv_heads, D = d_.head_dim;
  std::string q, k, v;
  if (d_.type == "gpt2") {
    auto qkv = linear(x, p + "attn.c_attn", C, 3 * C, true, false);
    if (!qkv.is_ok()) return qkv.status();
    const auto parts = g_.ops("Split", {qkv.value(), g_.const_ints({C, C, C})}, 3, {{"axis", int64_t{2}}});
    q = parts[0], k = parts[1], v = parts[2];
  } else {
    auto qs = linear(x, p + "self_attn.q_proj", C, H * D, d_.qkv_bias, true);
    auto ks = linear(x, p + "self_attn.k_proj", C, KV * D, d_.qkv_bias, true);
    auto vs = linear(x, p + "self_attn.v_proj", C, KV * D, d_.qkv_bias, true);
    for (const auto* s : {&qs, &ks, &vs})
      if (!s->is_ok()) return s->status();
    q = qs.value(), k = ks.value(), v = vs.value();
  }
  // (B,T,heads*D) -> (B,heads,T,D)
  auto heads = [&](const std::string& t, int64_t n) {
    return g_.op("Transpose", {g_.op("Reshape", {t, g_.const_ints({0, 0, n, D})})},
                 {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  };
  q = heads(q, H), k = heads(k, KV), v = heads(v, KV);
  if (d_.type == "llama") q = rope(q, cos_, sin_), k = rope(k, cos_, sin_);
  const std::string n = std::to_string(layer);
  const std::string keys = g_.op("Concat", {"past_key_values." + n + ".key", k}, {{"axis", int64_t{2}}}, "present." + n + ".key");
  const std::string values =
      g_.op("Concat", {"past_key_values." + n + ".value", v}, {{"axis", int64_t{2}}}, "present." + n + ".value");
  // Grouped heads: queries as (B,KV,H/KV,T,D) against keys (B,KV,1,S,D), broadcast by MatMul.
  const std::string qg = g_.op("Reshape", {q, g_.const_ints({0, KV, H / KV, -1, D})});
  const std::string kt = g_.op("Transpose", {g_.op("Unsqueeze", {keys, g_.const_ints({2})})},
                               {{"perm", std::vector<int64_t>{0, 1, 2, 4, 3}}});
  const std::string scores =
      g_.op("Mul", {g_.op("MatMul", {qg, kt}), g_.const_float(static_cast<float>(1.0 / std::sqrt(static_cast<double>(D))))});
  const std::string masked = g_.op("Where", {mask_, scores, g_.const_float(std::numeric_limits<float>::lowest())});
  const std::string probs = g_.op("Softmax", {masked}, {{"axis", int64_t{-1}}});
  const std::string y = g_.op("MatMul", {probs, g_.op("Unsqueeze", {values, g_.const_ints({2})})});
  // (B,KV,H/KV,T,D) -> (B,H,T,D) -> (B,T,H,D) -> (B,T,H*D)
  const std::string merged = g_.op(
      "Reshape", {g_.op("Transpose", {g_.op("Reshape", {y, g_.const_ints({0, H, -1, D})})}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}),
                  g_.const_ints({0, 0, H * D})});
  return d_.type == "gpt2" ? linear(merged, p + "attn.c_proj", C, C, true, false)
                           : linear(merged, p + "self_attn.o_proj", H * D, C, false, true);
}

StatusOr<std::string> DecoderBuilder::mlp(const std::string& x, int64_t layer) {
  const std::string p = block_prefix(layer);
  const int64_t C = d_.embd;
  if (d_.type == "gpt2") {
    auto h = linear(x, p + "mlp.c_fc", C, 4 * C, true, false);
    if (!h.is_ok()) return h.status();
    // GELU's tanh form ("gelu_new"): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
    const std::string& a = h.value();
    const std::string cube = g_.op("Mul", {g_.op("Mul", {a, a}), a});
    const std::string inner = g_.op("Mul", {g_.op("Add", {a, g_.op("Mul", {cube, g_.const_float(0.044715f)})}),
                                            g_.const_float(static_cast<float>(std::sqrt(2.0 / std::numbers::pi)))});
    const std::string gelu = g_.op(
        "Mul", {g_.op("Mul", {a, g_.const_float(0.5f)}), g_.op("Add", {g_.op("Tanh", {inner}), g_.const_float(1.0f)})});
    return linear(gelu, p + "mlp.c_proj", 4 * C, C, true, false);
  }
  const int64_t I = weights_.count(p + "mlp.gate_proj.weight") ? weights_.at(p + "mlp.gate_proj.weight").shape[0] : 0;
  auto gate = linear(x, p + "mlp.gate_proj", C, I, false, true);
  if (!gate.is_ok()) return gate.status();
  auto up = linear(x, p + "mlp.up_proj", C, I, false, true);
  if (!up.is_ok()) return up.status();
  // SwiGLU: silu(gate) * up, silu(g) = g * sigmoid(g).
  const std::string silu = g_.op("Mul", {gate.value(), g_.op("Sigmoid", {gate.value()})});
  return linear(g_.op("Mul", {silu, up.value()}), p + "mlp.down_proj", I, C, false, true);
}

Status DecoderBuilder::build() {
  using onnx::TensorProto;
  const std::vector<OnnxDim> ids_dims = {"batch_size", "sequence_length"};
  const std::vector<OnnxDim> kv_past = {"batch_size", d_.kv_heads, "past_sequence_length", d_.head_dim};
  const std::vector<OnnxDim> kv_present = {"batch_size", d_.kv_heads, "past_sequence_length + sequence_length", d_.head_dim};
  g_.input("input_ids", TensorProto::INT64, ids_dims);
  g_.input("attention_mask", TensorProto::INT64, {"batch_size", "past_sequence_length + sequence_length"});
  // Both families take position_ids, as optimum's exports of them do: a row's positions restart
  // after the padding its attention_mask hides (left-padded batches).
  g_.input("position_ids", TensorProto::INT64, ids_dims);
  for (int64_t i = 0; i < d_.layers; ++i) {
    g_.input("past_key_values." + std::to_string(i) + ".key", TensorProto::FLOAT, kv_past);
    g_.input("past_key_values." + std::to_string(i) + ".value", TensorProto::FLOAT, kv_past);
  }
  g_.output("logits", TensorProto::FLOAT, {"batch_size", "sequence_length", d_.vocab});
  for (int64_t i = 0; i < d_.layers; ++i) {
    g_.output("present." + std::to_string(i) + ".key", TensorProto::FLOAT, kv_present);
    g_.output("present." + std::to_string(i) + ".value", TensorProto::FLOAT, kv_present);
  }

  // Lengths as scalars: past from layer 0's cache, total = past + this call's tokens.
  auto scalar_dim = [&](const std::string& t, int64_t axis) {
    return g_.op("Squeeze", {g_.op("Shape", {t}, {{"start", axis}, {"end", axis + 1}})});
  };
  const std::string past = scalar_dim("past_key_values.0.key", 2);
  const std::string total = g_.op("Add", {past, scalar_dim("input_ids", 1)});
  // The mask (B,1,1,T,S): key j is visible to query i (at past + i) when j <= past + i and the
  // attention_mask keeps j.
  const std::string query_pos = g_.op("Range", {past, total, g_.const_int(1)});
  const std::string key_pos = g_.op("Range", {g_.const_int(0), total, g_.const_int(1)});
  const std::string causal = g_.op("LessOrEqual", {key_pos, g_.op("Unsqueeze", {query_pos, g_.const_ints({1})})});
  const std::string keep = g_.op("Unsqueeze", {g_.op("Cast", {"attention_mask"}, {{"to", int64_t{TensorProto::BOOL}}}),
                                               g_.const_ints({1, 2, 3})});
  mask_ = g_.op("And", {causal, keep});

  std::string x;
  if (d_.type == "gpt2") {
    auto wte = get("wte.weight", {d_.vocab, d_.embd});
    auto wpe = get("wpe.weight", {d_.context, d_.embd});
    if (!wte.is_ok()) return wte.status();
    if (!wpe.is_ok()) return wpe.status();
    x = g_.op("Add", {g_.op("Gather", {table("wte.weight", *wte.value()), "input_ids"}),
                      g_.op("Gather", {table("wpe.weight", *wpe.value()), "position_ids"})});
  } else {
    auto emb = get("model.embed_tokens.weight", {d_.vocab, d_.embd});
    if (!emb.is_ok()) return emb.status();
    x = g_.op("Gather", {table("model.embed_tokens.weight", *emb.value()), "input_ids"});
    // cos and sin of every position the model has, computed as kernels/cpu/rope.cc does (the
    // angle and its cos/sin in double, rounded to float), both halves alike: (context, D).
    const int64_t D = d_.head_dim, half = D / 2;
    std::vector<float> cos(static_cast<size_t>(d_.context * D)), sin(cos.size());
    for (int64_t p = 0; p < d_.context; ++p)
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(p) * rope_inv_freq(d_.rope, i, D);
        cos[p * D + i] = cos[p * D + half + i] = static_cast<float>(std::cos(angle));
        sin[p * D + i] = sin[p * D + half + i] = static_cast<float>(std::sin(angle));
      }
    // Gathered by position: (B,T,D) -> (B,1,T,D) against (B,heads,T,D).
    auto gathered = [&](const std::string& name, const std::vector<float>& t) {
      return g_.op("Unsqueeze", {g_.op("Gather", {g_.floats(name, {d_.context, D}, t.data()), "position_ids"}),
                                 g_.const_ints({1})});
    };
    cos_ = gathered("rope.cos", cos);
    sin_ = gathered("rope.sin", sin);
  }
  for (int64_t i = 0; i < d_.layers; ++i) {
    const std::string p = block_prefix(i);
    auto n1 = norm(x, d_.type == "gpt2" ? p + "ln_1" : p + "input_layernorm");
    if (!n1.is_ok()) return n1.status();
    auto a = attention(n1.value(), i);
    if (!a.is_ok()) return a.status();
    x = g_.op("Add", {x, a.value()});
    auto n2 = norm(x, d_.type == "gpt2" ? p + "ln_2" : p + "post_attention_layernorm");
    if (!n2.is_ok()) return n2.status();
    auto m = mlp(n2.value(), i);
    if (!m.is_ok()) return m.status();
    x = g_.op("Add", {x, m.value()});
  }
  auto h = norm(x, d_.type == "gpt2" ? "ln_f" : "model.norm");
  if (!h.is_ok()) return h.status();
  // The LM head, (vocab, embd) as stored; a tied one is the embedding table itself (f32, f16),
  // or its int8 copy.
  const std::string head_name = d_.type == "gpt2" ? "wte.weight" : d_.tied ? "model.embed_tokens.weight" : "lm_head.weight";
  auto head = get(head_name, {d_.vocab, d_.embd});
  if (!head.is_ok()) return head.status();
  std::string hw;
  if (w_ == OnnxWeights::kInt8) {
    hw = matrix(head_name + "_head", *head.value(), /*out_in=*/true);  // (embd, vocab)
  } else {
    const bool shared = head_name != "lm_head.weight";
    const std::string t = shared ? head_name : table(head_name, *head.value());
    const std::string f = shared && w_ == OnnxWeights::kF16
                              ? g_.op("Cast", {head_name}, {{"to", int64_t{TensorProto::FLOAT}}})
                              : t;
    hw = g_.op("Transpose", {f}, {{"perm", std::vector<int64_t>{1, 0}}});
  }
  g_.op("MatMul", {h.value(), hw}, {}, "logits");
  return Status::ok();
}

StatusOr<Dims> dims_of(const models::ModelConfig& cfg) {
  json hf;
  try {
    hf = json::parse(models::model_family(cfg.arch).to_hf_config(cfg));
  } catch (const json::exception& e) {
    return Status::error(ErrorKind::kInternal, std::string("export: the model's Hugging Face config does not parse: ") + e.what());
  }
  Dims d;
  const std::string type = hf.value("model_type", "");
  try {
    if (type == "gpt2") {
      d.type = "gpt2";
      if (hf.value("activation_function", "gelu_new") != "gelu_new")
        return Status::invalid("export --format onnx: activation_function " + hf.at("activation_function").dump() +
                               "; the gpt2 graph writes gelu_new");
      d.layers = hf.at("n_layer"), d.heads = hf.at("n_head"), d.embd = hf.at("n_embd");
      d.kv_heads = d.heads, d.vocab = hf.at("vocab_size"), d.context = hf.at("n_positions");
      d.eps = hf.at("layer_norm_epsilon");
    } else if (type == "llama" || type == "qwen2") {
      d.type = "llama";
      if (hf.value("use_sliding_window", false))
        return Status::invalid("export --format onnx: the model attends within a sliding window of " +
                               hf.at("sliding_window").dump() + " tokens; the ONNX graph attends to the whole context");
      d.layers = hf.at("num_hidden_layers"), d.heads = hf.at("num_attention_heads");
      d.kv_heads = hf.at("num_key_value_heads"), d.embd = hf.at("hidden_size"), d.vocab = hf.at("vocab_size");
      d.context = hf.at("max_position_embeddings"), d.eps = hf.at("rms_norm_eps");
      d.rope.theta = hf.value("rope_theta", 10000.0);
      if (hf.contains("rope_scaling") && !hf.at("rope_scaling").is_null()) {
        const json& s = hf.at("rope_scaling");
        d.rope.factor = s.at("factor"), d.rope.low_freq_factor = s.at("low_freq_factor");
        d.rope.high_freq_factor = s.at("high_freq_factor");
        d.rope.original_max_position = s.at("original_max_position_embeddings");
      }
      d.qkv_bias = type == "qwen2";
      d.tied = hf.value("tie_word_embeddings", false);
    } else {
      return Status::invalid("export --format onnx: model_type \"" + type + "\" (model.arch = \"" + cfg.arch +
                             "\"); trident writes ONNX for gpt2 and llama (llama, qwen2; not mistral's sliding window)");
    }
  } catch (const json::exception& e) {
    return Status::error(ErrorKind::kInternal, "export: the model's Hugging Face config lacks a field ONNX needs: " + std::string(e.what()));
  }
  d.head_dim = d.embd / d.heads;
  if (d.heads <= 0 || d.kv_heads <= 0 || d.heads % d.kv_heads != 0 || d.head_dim % 2 != 0)
    return Status::invalid("export --format onnx: " + std::to_string(d.heads) + " heads over " + std::to_string(d.kv_heads) +
                           " kv heads of " + std::to_string(d.head_dim) + " dims: the graph needs heads a multiple of kv heads "
                           "and an even head_dim");
  return d;
}

}  // namespace

StatusOr<OnnxExportResult> write_onnx_model(const std::string& path, const models::ModelConfig& cfg,
                                            const std::vector<checkpoint::TensorSpec>& specs,
                                            const std::function<StatusOr<Tensor>(size_t)>& read, OnnxWeights weights,
                                            uint64_t inline_bytes) {
  if (const int64_t sparse = models::model_family(cfg.arch).shapes(cfg).sparse_blocks; sparse > 0)
    return Status::invalid("export --format onnx: the model has " + std::to_string(sparse) +
                           " mixture-of-experts blocks; their ONNX graph is not written yet (issue #51): export "
                           "--format hf writes them as Mixtral / Qwen2-MoE");
  auto dims = dims_of(cfg);
  if (!dims.is_ok()) return dims.status();
  const models::ModelFamily& family = models::model_family(cfg.arch);
  std::map<std::string, Weight> loaded;
  for (size_t i = 0; i < specs.size(); ++i) {
    auto t = read(i);
    if (!t.is_ok()) return t.status();
    const Tensor c = core::contiguous(core::cast(t.value(), DType::kF32));
    const float* p = c.data_ptr<float>();
    Weight w{c.shape().vec(), std::vector<float>(p, p + c.numel())};
    for (float v : w.data)
      if (!std::isfinite(v))
        return Status::invalid("export --format onnx: the parameter '" + specs[i].name + "' holds a value that is not finite");
    loaded.emplace(family.hf_name(cfg, specs[i].name), std::move(w));
  }
  onnx::ModelProto model;
  model.set_ir_version(kIrVersion);
  model.set_producer_name("trident");
  model.set_model_version(1);
  onnx::OperatorSetIdProto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  onnx::GraphProto* graph = model.mutable_graph();
  graph->set_name(dims.value().type + "_decoder_with_past");
  OnnxGraph g(graph);
  DecoderBuilder builder(g, dims.value(), weights, loaded);
  if (Status s = builder.build(); !s.is_ok()) return s;
  loaded.clear();
  const int graph_inputs = graph->input_size(), graph_outputs = graph->output_size();
  const int nodes = graph->node_size(), initializers = graph->initializer_size();
  auto bytes = write_onnx_file(path, model, inline_bytes);
  if (!bytes.is_ok()) return bytes.status();
  OnnxExportResult result;
  result.bytes = bytes.value().bytes;
  result.external_bytes = bytes.value().external_bytes;
  result.architecture = dims.value().type;
  // Read back what was written before it is reported as exported.
  auto back = read_onnx_file(path);
  if (!back.is_ok()) return Status::error(ErrorKind::kInternal, "export: the file just written does not read back: " + back.status().message());
  result.file = back.value();
  if (result.file.inputs.size() != static_cast<size_t>(graph_inputs) ||
      result.file.outputs.size() != static_cast<size_t>(graph_outputs) || result.file.nodes != nodes ||
      result.file.initializers != initializers || result.file.initializer_bytes != g.initializer_bytes())
    return Status::error(ErrorKind::kInternal, "export: " + path + " read back with a different graph than was written");
  return result;
}

}  // namespace trident::exporting
