#include "loading/quantized_dir.h"

#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "autograd/grad_mode.h"
#include "checkpoint/atomic_file.h"
#include "checkpoint/env.h"
#include "checkpoint/safetensors.h"
#include "core/copy.h"
#include "core/views.h"
#include "train/trainer.h"

namespace trident::loading {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kWeightsFileName = "model.safetensors";
constexpr const char* kFormat = "trident-quantized";
constexpr int kVersion = 1;
// A Hugging Face source's tokenizer files, copied when present.
constexpr const char* kTokenizerFiles[] = {"tokenizer.json", "tokenizer.model", "tokenizer_config.json",
                                           "special_tokens_map.json", "vocab.json", "merges.txt"};

std::string path_in(const std::string& dir, const std::string& name) { return (fs::path(dir) / name).string(); }

Status invalid_in(const std::string& file, const std::string& what) { return Status::invalid(file + ": " + what); }

std::vector<int64_t> dims(const Shape& s) { return std::vector<int64_t>(s.begin(), s.end()); }

StatusOr<json> read_json(const std::string& path) {
  auto text = checkpoint::read_file(checkpoint::default_env(), path);
  if (!text.is_ok()) return text.status();
  try {
    return json::parse(text.value());
  } catch (const json::exception& e) {
    return invalid_in(path, std::string("not valid JSON: ") + e.what());
  }
}

}  // namespace

bool is_quantized_dir(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(path) / kQuantizationFileName, ec);
}

StatusOr<uint64_t> write_quantized_dir(const QuantizedDirWrite& w, models::CausalLM& model,
                                       const std::vector<quantization::QuantizedParameter>& layers) {
  checkpoint::Env* env = checkpoint::default_env();
  if (Status s = checkpoint::create_dirs(env, w.out); !s.is_ok()) return s;
  // Incomplete until quantization.json is back (Note [Quantized directories]).
  const std::string info_path = path_in(w.out, kQuantizationFileName);
  if (fs::exists(info_path))
    if (Status s = env->remove_file(info_path); !s.is_ok()) return s;

  std::map<std::string, const quantization::QuantizedParameter*> quantized;
  for (const auto& l : layers) quantized[l.param] = &l;
  std::vector<checkpoint::NamedTensor> tensors;
  json params = json::object();
  for (const auto& [name, p] : model.named_parameters()) {
    const auto it = quantized.find(name);
    if (it == quantized.end()) {
      tensors.push_back({name, p});
      continue;
    }
    for (const auto& [role, t] : it->second->weight->stored()) tensors.push_back({name + "." + role, t});
    params[name] = {{"shape", dims(p.shape())},
                    {"dtype", checkpoint::safetensors_dtype_name(p.dtype())},
                    {"transposed", it->second->transposed}};
  }
  // A tied head's quantized copy, beside the table it shares (Note [What stays in full precision]).
  for (const auto& l : layers) {
    if (l.tied_to.empty()) continue;
    const Tensor table = model.parameter(l.tied_to);
    for (const auto& [role, t] : l.weight->stored()) tensors.push_back({l.param + "." + role, t});
    params[l.param] = {{"shape", dims(table.shape())},
                       {"dtype", checkpoint::safetensors_dtype_name(table.dtype())},
                       {"transposed", false},
                       {"tied_to", l.tied_to}};
  }
  auto out = checkpoint::AtomicFileWriter::create(env, path_in(w.out, kWeightsFileName));
  if (!out.is_ok()) return out.status();
  if (Status s = checkpoint::write_safetensors(out.value(), tensors, {{"format", "pt"}, {"trident_quantized", w.scheme->name}});
      !s.is_ok())
    return s;
  const uint64_t bytes = out.value().size();
  if (Status s = out.value().commit(); !s.is_ok()) return s;
  if (auto s = checkpoint::write_file_atomically(env, path_in(w.out, "config.toml"), train::config_to_toml(*w.cfg));
      !s.is_ok())
    return s.status();
  bool tokenizer_in_dir = false;
  if (!w.tokenizer_dir.empty()) {
    for (const char* name : kTokenizerFiles) {
      const std::string from = path_in(w.tokenizer_dir, name);
      if (!fs::exists(from)) continue;
      auto text = checkpoint::read_file(env, from);
      if (!text.is_ok()) return text.status();
      if (auto s = checkpoint::write_file_atomically(env, path_in(w.out, name), text.value()); !s.is_ok()) return s.status();
      tokenizer_in_dir = true;
    }
  }
  const json info = {{"format", kFormat},
                     {"version", kVersion},
                     {"scheme", w.scheme->name},
                     {"block_format", w.scheme->format},
                     {"source", w.source},
                     {"skip", w.skip},
                     {"tokenizer_in_dir", tokenizer_in_dir},
                     {"parameters", params}};
  if (auto s = checkpoint::write_file_atomically(env, info_path, info.dump(2) + "\n"); !s.is_ok()) return s.status();
  return bytes;
}

StatusOr<QuantizedDirInfo> read_quantized_dir_info(const std::string& dir) {
  const std::string path = path_in(dir, kQuantizationFileName);
  auto j = read_json(path);
  if (!j.is_ok()) return j.status();
  const json& info = j.value();
  auto string_field = [&](const char* key) -> StatusOr<std::string> {
    if (!info.is_object() || !info.contains(key) || !info[key].is_string())
      return invalid_in(path, std::string("no string \"") + key + "\" (a quantized directory's description)");
    return info[key].get<std::string>();
  };
  auto format = string_field("format");
  if (!format.is_ok()) return format.status();
  if (format.value() != kFormat)
    return invalid_in(path, "\"format\" is \"" + format.value() + "\", not \"" + kFormat + "\"");
  if (!info.contains("version") || !info["version"].is_number_integer() || info["version"].get<int>() != kVersion)
    return invalid_in(path, "\"version\" is " + (info.contains("version") ? info["version"].dump() : std::string("missing")) +
                                "; this trident reads version " + std::to_string(kVersion));
  auto scheme = string_field("scheme");
  if (!scheme.is_ok()) return scheme.status();
  if (quantization::find_quant_scheme(scheme.value()) == nullptr)
    return invalid_in(path, "unknown scheme \"" + scheme.value() + "\" (this trident knows " +
                                quantization::quant_scheme_names() + ")");
  if (!info.contains("parameters") || !info["parameters"].is_object())
    return invalid_in(path, "no \"parameters\" object (the quantized parameters)");
  QuantizedDirInfo out;
  out.scheme = scheme.value();
  out.source = info.value("source", "");
  out.tokenizer_in_dir = info.value("tokenizer_in_dir", false);
  return out;
}

StatusOr<std::vector<quantization::QuantizedParameter>> load_quantized_dir(const std::string& dir,
                                                                          models::CausalLM& model) {
  auto info = read_quantized_dir_info(dir);
  if (!info.is_ok()) return info.status();
  const std::string info_path = path_in(dir, kQuantizationFileName), file = path_in(dir, kWeightsFileName);
  const json params = read_json(info_path).value()["parameters"];
  const quantization::QuantScheme& scheme = *quantization::find_quant_scheme(info.value().scheme);
  auto opened = checkpoint::SafetensorsReader::open(checkpoint::default_env(), file);
  if (!opened.is_ok()) return opened.status();
  const checkpoint::SafetensorsReader& reader = opened.value();
  autograd::NoGradGuard no_grad;

  std::set<std::string> used;
  std::vector<quantization::QuantizedParameter> applied;
  std::map<std::string, Tensor> model_params;
  for (const auto& [name, p] : model.named_parameters()) model_params.emplace(name, p);
  const std::optional<std::string> tied = model.tied_head_weight();
  for (const auto& [name, entry] : params.items()) {
    if (entry.is_object() && entry.contains("tied_to")) {
      if (!entry["tied_to"].is_string() || !tied || entry["tied_to"].get<std::string>() != *tied)
        return invalid_in(info_path, "quantized parameter '" + name + "' is a head tied to " + entry["tied_to"].dump() +
                                         ", but the model its config.toml builds has " +
                                         (tied ? "its head tied to \"" + *tied + "\"" : std::string("no tied head")));
      continue;
    }
    if (!model_params.contains(name))
      return invalid_in(info_path, "quantized parameter '" + name + "' is not a parameter of the model its config.toml builds");
  }
  // Each tensor as the file has it, checked against what it must be.
  auto load = [&](const std::string& name, DType dtype, const Shape& shape, const std::string& what) -> StatusOr<Tensor> {
    const checkpoint::SafetensorsEntry* e = reader.find(name);
    if (e == nullptr) return invalid_in(file, "tensor '" + name + "' is missing (" + what + ")");
    if (!(e->shape == shape))
      return invalid_in(file, "tensor '" + name + "' has shape " + e->shape.str() + ", expected " + shape.str() + " (" +
                                  what + ")");
    if (e->dtype != dtype)
      return invalid_in(file, "tensor '" + name + "' is " + e->dtype_name + ", expected " +
                                  checkpoint::safetensors_dtype_name(dtype) + " (" + what + ")");
    used.insert(name);
    return reader.load(name);
  };
  // A quantized parameter's entry `e`, checked against `p` (the model's parameter, or the table a
  // tied head shares), its stored tensors loaded and applied.
  auto apply_quantized = [&](const std::string& name, const json& e, const Tensor& p, const std::string& tied_to) -> Status {
    if (!e.is_object() || !e.contains("shape") || !e["shape"].is_array() || !e.contains("transposed") ||
        !e["transposed"].is_boolean() || !e.contains("dtype") || !e["dtype"].is_string())
      return invalid_in(info_path, "parameter '" + name + "' needs \"shape\", \"dtype\" and \"transposed\"");
    const Shape shape(e["shape"].get<std::vector<int64_t>>());
    if (!(shape == p.shape()))
      return invalid_in(info_path, "parameter '" + name + "' has shape " + shape.str() + ", the model's is " + p.shape().str());
    const auto dtype = checkpoint::dtype_from_safetensors(e["dtype"].get<std::string>());
    if (!dtype || !is_floating(*dtype))
      return invalid_in(info_path, "parameter '" + name + "' has dtype " + e["dtype"].dump() + ", not a floating one");
    const bool transposed = e["transposed"].get<bool>();
    if (transposed && shape.size() != 2) return invalid_in(info_path, "parameter '" + name + "' is transposed but not a matrix");
    const Shape qshape = transposed ? Shape{shape[1], shape[0]} : shape;
    std::vector<Tensor> stored;
    std::vector<quantization::StoredSpec> specs;
    try {
      specs = scheme.layout(qshape);
    } catch (const std::exception& ex) {
      return invalid_in(info_path, "parameter '" + name + "' " + qshape.str() + " cannot be " + scheme.name + ": " + ex.what());
    }
    for (const quantization::StoredSpec& s : specs) {
      auto t = load(name + "." + s.role, s.dtype, s.shape, "the " + s.role + " of " + scheme.name + " '" + name + "'");
      if (!t.is_ok()) return t.status();
      stored.push_back(t.value());
    }
    try {
      quantization::QuantizedParameter q{name, scheme.from_stored(qshape, *dtype, stored), transposed, tied_to};
      quantization::apply_quantized_layer(model, q);
      applied.push_back(std::move(q));
    } catch (const std::exception& ex) {
      return invalid_in(file, "parameter '" + name + "': " + ex.what());
    }
    return Status::ok();
  };
  for (const auto& [name, p] : model.named_parameters()) {
    if (!params.contains(name)) {
      auto t = load(name, p.dtype(), p.shape(), "a full-precision parameter of the model");
      if (!t.is_ok()) return t.status();
      core::copy_(p, t.value());
      continue;
    }
    if (Status s = apply_quantized(name, params[name], p, ""); !s.is_ok()) return s;
  }
  for (const auto& [name, e] : params.items())
    if (e.contains("tied_to"))
      if (Status s = apply_quantized(name, e, model.parameter(*tied), *tied); !s.is_ok()) return s;
  for (const checkpoint::SafetensorsEntry& e : reader.entries())
    if (!used.contains(e.name))
      return invalid_in(file, "tensor '" + e.name + "' belongs to no parameter of the model (a parameter quantized "
                              "without an entry in " + std::string(kQuantizationFileName) + "?)");
  return applied;
}

}  // namespace trident::loading
