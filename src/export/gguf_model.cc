#include "export/gguf_model.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/copy.h"
#include "core/half.h"
#include "core/parallel.h"
#include "export/gguf_vocab.h"
#include "kernels/cpu/ggml_blocks.h"
#include "models/registry.h"

namespace trident::exporting {

StatusOr<GgufWeights> parse_gguf_weights(const std::string& value, const std::string& where) {
  std::string v = value;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  if (v == "f32") return GgufWeights::kF32;
  if (v == "f16") return GgufWeights::kF16;
  if (v == "q8_0") return GgufWeights::kQ8_0;
  if (v == "q4_0") return GgufWeights::kQ4_0;
  return Status::invalid(where + " \"" + value + "\" is not a GGUF weight type trident writes; allowed: f32, f16, q8_0, q4_0");
}

const char* gguf_weights_name(GgufWeights w) {
  switch (w) {
    case GgufWeights::kF32: return "f32";
    case GgufWeights::kF16: return "f16";
    case GgufWeights::kQ8_0: return "q8_0";
    case GgufWeights::kQ4_0: return "q4_0";
  }
  return "?";
}

namespace {

using nlohmann::json;

// How one parameter goes into the file.
struct Mapped {
  std::string name;      // GGUF's
  bool transpose = false;  // Conv1D's (in, out) to (out, in)
  int64_t permute_heads = 0;  // q/k rows from rotate-half to interleaved pairs, over this many heads
};

// "h.3.attn.c_attn.weight" -> {3, "attn.c_attn.weight"} after `prefix`; nullopt if not a block's.
std::optional<std::pair<std::string, std::string>> block_of(const std::string& name, const std::string& prefix) {
  if (!name.starts_with(prefix)) return std::nullopt;
  const size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size()) return std::nullopt;
  const std::string index = name.substr(prefix.size(), dot - prefix.size());
  if (!std::all_of(index.begin(), index.end(), [](unsigned char c) { return std::isdigit(c); })) return std::nullopt;
  return std::make_pair(index, name.substr(dot + 1));
}

// The tensor's name in GGUF and how to lay it out, from its Hugging Face name.
std::optional<Mapped> map_gpt2(const std::string& hf) {
  static const std::pair<const char*, const char*> top[] = {
      {"wte.weight", "token_embd.weight"}, {"wpe.weight", "position_embd.weight"},
      {"ln_f.weight", "output_norm.weight"}, {"ln_f.bias", "output_norm.bias"},
      {"lm_head.weight", "output.weight"}};  // a quantized copy of the tied head
  for (const auto& [from, to] : top)
    if (hf == from) return Mapped{to};
  const auto block = block_of(hf, "h.");
  if (!block) return std::nullopt;
  static const std::pair<const char*, const char*> parts[] = {
      {"ln_1", "attn_norm"}, {"attn.c_attn", "attn_qkv"}, {"attn.c_proj", "attn_output"},
      {"ln_2", "ffn_norm"},  {"mlp.c_fc", "ffn_up"},      {"mlp.c_proj", "ffn_down"}};
  for (const auto& [from, to] : parts)
    for (const char* leaf : {".weight", ".bias"})
      if (block->second == std::string(from) + leaf) {
        const bool conv1d = std::string(leaf) == ".weight" && std::string(from).find('.') != std::string::npos;
        return Mapped{"blk." + block->first + "." + to + leaf, conv1d};
      }
  return std::nullopt;
}

std::optional<Mapped> map_llama(const std::string& hf, int64_t heads, int64_t kv_heads) {
  static const std::pair<const char*, const char*> top[] = {{"model.embed_tokens.weight", "token_embd.weight"},
                                                            {"model.norm.weight", "output_norm.weight"},
                                                            {"lm_head.weight", "output.weight"}};
  for (const auto& [from, to] : top)
    if (hf == from) return Mapped{to};
  const auto block = block_of(hf, "model.layers.");
  if (!block) return std::nullopt;
  static const std::pair<const char*, const char*> parts[] = {
      {"input_layernorm.weight", "attn_norm.weight"}, {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},   {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"}, {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},    {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"}};
  for (const auto& [from, to] : parts)
    if (block->second == from) {
      Mapped m{"blk." + block->first + "." + to};
      if (block->second == "self_attn.q_proj.weight") m.permute_heads = heads;
      if (block->second == "self_attn.k_proj.weight") m.permute_heads = kv_heads;
      return m;
    }
  return std::nullopt;
}

int64_t int_of(const json& j, const char* key) { return j.at(key).get<int64_t>(); }
GgufValue u32_of(const json& j, const char* key) { return GgufValue::u32(static_cast<uint32_t>(int_of(j, key))); }

// convert_hf_to_gguf's permute() of q/k rows, from Hugging Face's rotate-half layout to
// llama.cpp's interleaved pairs: reshape(heads, 2, d/2, in).swapaxes(1, 2), so row h*d + 2i + j
// of the result is row h*d + j*d/2 + i of the weight (d = rows / heads).
int64_t source_row(int64_t r, int64_t rows, int64_t heads) {
  const int64_t d = rows / heads, h = r / d, i = (r % d) / 2, j = r % 2;
  return h * d + j * (d / 2) + i;
}

// The weight as floats, laid out as GGUF stores it (rows of ne[0]).
std::vector<float> laid_out(const Tensor& t, const Mapped& m, int64_t& rows, int64_t& cols) {
  const Tensor c = core::contiguous(core::cast(t, DType::kF32));
  const float* p = c.data_ptr<float>();
  const int64_t n = c.numel();
  rows = c.dim() == 2 ? c.shape()[0] : 1;
  cols = c.dim() == 2 ? c.shape()[1] : n;
  std::vector<float> out(p, p + n);
  if (m.transpose) {
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) out[j * rows + i] = p[i * cols + j];
    std::swap(rows, cols);
  }
  if (m.permute_heads > 0)
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(&out[r * cols], &p[source_row(r, rows, m.permute_heads) * cols], static_cast<size_t>(cols) * sizeof(float));
  return out;
}

std::string encoded(const std::vector<float>& x, int64_t rows, int64_t cols, GgmlType type) {
  std::string out;
  if (type == GgmlType::kF32) {
    out.assign(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float));
  } else if (type == GgmlType::kF16) {
    out.resize(x.size() * 2);
    parallel_for(0, static_cast<int64_t>(x.size()), 1 << 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const uint16_t h = f16::round_from_float(x[static_cast<size_t>(i)]);
        std::memcpy(&out[static_cast<size_t>(i) * 2], &h, 2);
      }
    });
  } else {
    namespace k = kernels::cpu;
    const k::GgmlBlockType t = type == GgmlType::kQ8_0 ? k::GgmlBlockType::kQ8_0 : k::GgmlBlockType::kQ4_0;
    const int64_t code = k::ggml_code_bytes(t), per_row = cols / k::kGgmlBlock, block = 2 + code;
    out.resize(static_cast<size_t>(rows * per_row * block));
    parallel_for(0, rows, 16, [&](int64_t r0, int64_t r1) {
      std::vector<uint8_t> codes(static_cast<size_t>(per_row * code));
      std::vector<uint16_t> scales(static_cast<size_t>(per_row));
      for (int64_t r = r0; r < r1; ++r) {
        k::ggml_quantize_blocks(t, &x[static_cast<size_t>(r * cols)], cols, codes.data(), scales.data());
        char* dst = &out[static_cast<size_t>(r * per_row * block)];
        for (int64_t b = 0; b < per_row; ++b) {  // ggml's block_q8_0 / block_q4_0: {fp16 d, qs}
          std::memcpy(dst + b * block, &scales[static_cast<size_t>(b)], 2);
          std::memcpy(dst + b * block + 2, &codes[static_cast<size_t>(b * code)], static_cast<size_t>(code));
        }
      }
    });
  }
  return out;
}

// A weight already in ggml's blocks, rows along the input dimension: the blocks {fp16 d, codes}
// of each row, the rows permuted as `m` says (the transpose is the quantized matrix already).
std::string copied_blocks(const quantization::GgmlWeight& w, const Mapped& m) {
  namespace k = kernels::cpu;
  const int64_t rows = w.shape()[0], per_row = w.shape()[1] / k::kGgmlBlock, code = k::ggml_code_bytes(w.type());
  const int64_t block = 2 + code;
  std::string out(static_cast<size_t>(rows * per_row * block), '\0');
  std::vector<uint8_t> codes(static_cast<size_t>(per_row * code));
  std::vector<uint16_t> scales(static_cast<size_t>(per_row));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t from = m.permute_heads > 0 ? source_row(r, rows, m.permute_heads) : r;
    w.unpack_rows(from, from + 1, codes.data(), scales.data());
    char* dst = &out[static_cast<size_t>(r * per_row * block)];
    for (int64_t b = 0; b < per_row; ++b) {
      std::memcpy(dst + b * block, &scales[static_cast<size_t>(b)], 2);
      std::memcpy(dst + b * block + 2, &codes[static_cast<size_t>(b * code)], static_cast<size_t>(code));
    }
  }
  return out;
}

}  // namespace

StatusOr<GgufExportResult> write_gguf_model(const std::string& path, const models::ModelConfig& cfg,
                                            const std::vector<checkpoint::TensorSpec>& specs,
                                            const std::function<StatusOr<Tensor>(size_t)>& read, GgufWeights weights,
                                            const data::Tokenizer& tokenizer, const std::string& name) {
  std::vector<GgufParameter> params;
  for (const checkpoint::TensorSpec& s : specs) params.push_back({s, nullptr});
  return write_gguf_model(path, cfg, params, read, weights, tokenizer, name);
}

StatusOr<GgufExportResult> write_gguf_model(const std::string& path, const models::ModelConfig& cfg,
                                            const std::vector<GgufParameter>& params,
                                            const std::function<StatusOr<Tensor>(size_t)>& read, GgufWeights weights,
                                            const data::Tokenizer& tokenizer, const std::string& name) {
  const models::ModelFamily& family = models::model_family(cfg.arch);
  if (const int64_t sparse = family.shapes(cfg).sparse_blocks; sparse > 0)
    return Status::invalid("export --format gguf: the model has " + std::to_string(sparse) +
                           " mixture-of-experts blocks; llama.cpp's expert tensors are not written yet (issue #51): "
                           "export --format hf writes them as Mixtral / Qwen2-MoE");
  json hf;
  try {
    hf = json::parse(family.to_hf_config(cfg));
  } catch (const json::exception& e) {
    return Status::error(ErrorKind::kInternal, std::string("export: the model's Hugging Face config does not parse: ") + e.what());
  }
  const std::string model_type = hf.value("model_type", "");
  GgufExportResult result;
  GgufMetadata m;
  int64_t heads = 0, kv_heads = 0;
  if (model_type == "gpt2") {
    result.architecture = "gpt2";
  } else if (model_type == "llama" || model_type == "mistral") {
    result.architecture = "llama";
    if (hf.contains("rope_scaling") && !hf.at("rope_scaling").is_null())
      return Status::invalid("export --format gguf: the model has rope_scaling " + hf.at("rope_scaling").dump() +
                             " (Llama 3.1's); trident does not write its rope_freqs tensor yet");
    heads = int_of(hf, "num_attention_heads");
    kv_heads = hf.contains("num_key_value_heads") ? int_of(hf, "num_key_value_heads") : heads;
    if (hf.contains("sliding_window") && !hf.at("sliding_window").is_null())
      result.notes.push_back("the model attends within a sliding window of " + hf.at("sliding_window").dump() +
                             " tokens; llama.cpp's llama architecture attends to the whole context, so past the "
                             "window its output differs");
  } else {
    return Status::invalid("export --format gguf: model_type \"" + model_type + "\" (model.arch = \"" + cfg.arch +
                           "\"); trident writes GGUF for gpt2 and llama (llama, mistral)");
  }
  const GgmlType want = weights == GgufWeights::kF32    ? GgmlType::kF32
                        : weights == GgufWeights::kF16  ? GgmlType::kF16
                        : weights == GgufWeights::kQ8_0 ? GgmlType::kQ8_0
                                                        : GgmlType::kQ4_0;
  auto block_type = [](const quantization::GgmlWeight& w) {
    return w.type() == kernels::cpu::GgmlBlockType::kQ8_0 ? GgmlType::kQ8_0 : GgmlType::kQ4_0;
  };
  // The file's type as llama.cpp names it: the copied blocks' ("mostly Q8_0"), else --type's.
  GgmlType file_type = want;
  for (const GgufParameter& p : params)
    if (p.blocks) file_type = block_type(*p.blocks);
  const std::string& a = result.architecture;
  m.emplace_back("general.architecture", GgufValue::string(a));
  m.emplace_back("general.name", GgufValue::string(name));
  m.emplace_back("general.file_type", GgufValue::u32(file_type == GgmlType::kF32 ? 0 : file_type == GgmlType::kF16 ? 1
                                                     : file_type == GgmlType::kQ4_0 ? 2 : 7));
  if (file_type == GgmlType::kQ8_0 || file_type == GgmlType::kQ4_0)
    m.emplace_back("general.quantization_version", GgufValue::u32(2));
  try {
    if (a == "gpt2") {
      m.emplace_back("gpt2.context_length", u32_of(hf, "n_ctx"));
      m.emplace_back("gpt2.embedding_length", u32_of(hf, "n_embd"));
      m.emplace_back("gpt2.feed_forward_length", GgufValue::u32(static_cast<uint32_t>(4 * int_of(hf, "n_embd"))));
      m.emplace_back("gpt2.block_count", u32_of(hf, "n_layer"));
      m.emplace_back("gpt2.attention.head_count", u32_of(hf, "n_head"));
      m.emplace_back("gpt2.attention.layer_norm_epsilon", GgufValue::f32(hf.at("layer_norm_epsilon").get<float>()));
    } else {
      const int64_t embd = int_of(hf, "hidden_size");
      m.emplace_back("llama.context_length", u32_of(hf, "max_position_embeddings"));
      m.emplace_back("llama.embedding_length", GgufValue::u32(static_cast<uint32_t>(embd)));
      m.emplace_back("llama.block_count", u32_of(hf, "num_hidden_layers"));
      m.emplace_back("llama.feed_forward_length", u32_of(hf, "intermediate_size"));
      m.emplace_back("llama.rope.dimension_count", GgufValue::u32(static_cast<uint32_t>(embd / heads)));
      m.emplace_back("llama.attention.head_count", GgufValue::u32(static_cast<uint32_t>(heads)));
      m.emplace_back("llama.attention.head_count_kv", GgufValue::u32(static_cast<uint32_t>(kv_heads)));
      m.emplace_back("llama.attention.layer_norm_rms_epsilon", GgufValue::f32(hf.at("rms_norm_eps").get<float>()));
      m.emplace_back("llama.rope.freq_base", GgufValue::f32(hf.value("rope_theta", 10000.0f)));
      m.emplace_back("llama.vocab_size", u32_of(hf, "vocab_size"));
    }
  } catch (const json::exception& e) {
    return Status::error(ErrorKind::kInternal, "export: the model's Hugging Face config lacks a field GGUF needs: " + std::string(e.what()));
  }
  auto vocab = gguf_tokenizer_metadata(tokenizer, cfg.vocab_size);
  if (!vocab.is_ok()) return Status::invalid("export --format gguf: " + vocab.status().message());
  for (auto& kv : vocab.value()) m.push_back(std::move(kv));

  std::vector<GgufTensorInfo> infos;
  std::vector<Mapped> mapped;
  for (const GgufParameter& param : params) {
    const checkpoint::TensorSpec& s = param.spec;
    const std::string hf_name = s.name == "lm_head.weight" ? s.name : family.hf_name(cfg, s.name);
    const auto mp = a == "gpt2" ? map_gpt2(hf_name) : map_llama(hf_name, heads, kv_heads);
    if (!mp) return Status::invalid("export --format gguf: the parameter '" + s.name + "' (Hugging Face '" + hf_name +
                                    "') has no GGUF name in the " + a + " architecture");
    GgufTensorInfo info;
    info.name = mp->name;
    const std::vector<int64_t> shape = s.shape.vec();
    if (shape.size() == 2) {
      info.ne = mp->transpose ? std::vector<int64_t>{shape[0], shape[1]} : std::vector<int64_t>{shape[1], shape[0]};
    } else {
      info.ne = {s.shape.product()};
    }
    const bool keep_f32 = shape.size() < 2 || info.name.ends_with("_norm.weight") || !info.name.ends_with(".weight") ||
                          info.name == "position_embd.weight";
    info.type = keep_f32 ? GgmlType::kF32 : want;
    if (param.blocks) {
      // The quantized matrix: (out, in) rows along the input, the transpose of a Conv1D weight.
      const Shape& q = param.blocks->shape();
      if (q.size() != 2 || shape.size() != 2 || info.ne != std::vector<int64_t>{q[1], q[0]})
        return Status::invalid("export --format gguf: the quantized weight of '" + s.name + "' has shape " + q.str() +
                               "; its parameter " + s.shape.str() + " needs rows of its input");
      info.type = block_type(*param.blocks);
    }
    if ((info.type == GgmlType::kQ8_0 || info.type == GgmlType::kQ4_0) && info.ne[0] % 32 != 0) {
      info.type = GgmlType::kF16;
      result.notes.push_back(info.name + " is F16: its rows of " + std::to_string(info.ne[0]) +
                             " values are not whole blocks of 32");
    }
    result.tensors.emplace_back(info.name, info.type);
    infos.push_back(std::move(info));
    mapped.push_back(*mp);
  }
  auto bytes = write_gguf(path, m, infos, [&](size_t i) -> StatusOr<std::string> {
    if (params[i].blocks) return copied_blocks(*params[i].blocks, mapped[i]);
    auto t = read(i);
    if (!t.is_ok()) return t.status();
    int64_t rows = 0, cols = 0;
    const std::vector<float> x = laid_out(t.value(), mapped[i], rows, cols);
    for (float v : x)
      if (!std::isfinite(v))
        return Status::invalid("export --format gguf: the parameter '" + params[i].spec.name +
                               "' holds a value that is not finite");
    return encoded(x, rows, cols, infos[i].type);
  });
  if (!bytes.is_ok()) return bytes.status();
  result.bytes = bytes.value();
  // Read back what was written: the file's structure, before it is reported as exported.
  auto back = read_gguf(path);
  if (!back.is_ok()) return Status::error(ErrorKind::kInternal, "export: the file just written does not read back: " + back.status().message());
  return result;
}

}  // namespace trident::exporting
