#include "models/registry.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/host_memory.h"
#include "models/gpt2/family.h"
#include "models/llama/family.h"

namespace trident::models {

const std::vector<ModelFamily>& model_families() {
  static const std::vector<ModelFamily> families = {gpt2::family(), llama::family()};
  return families;
}

const ModelFamily& model_family(const std::string& arch) {
  std::string names;
  for (const ModelFamily& f : model_families()) {
    if (f.arch == arch) return f;
    names += (names.empty() ? "" : ", ") + f.arch;
  }
  TRI_CHECK(false, "model.arch = \"", arch, "\" is not a model family; the families are: ", names);
}

namespace {

// nlohmann's message without its "[json.exception.parse_error.101] " tag, and a word on the
// literals Python's json.dump writes but JSON has not (NaN, Infinity), when the error is at one.
std::string parse_error_text(const nlohmann::json::parse_error& e, const std::string& text) {
  std::string what = e.what();
  if (const size_t tag = what.find("] "); what.starts_with("[json.exception.") && tag != std::string::npos)
    what = what.substr(tag + 2);
  size_t start = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
  while (start > 0 && (std::isalpha(static_cast<unsigned char>(text[start - 1])) || text[start - 1] == '-')) --start;
  for (const char* literal : {"NaN", "Infinity", "-Infinity"})
    if (text.compare(start, std::char_traits<char>::length(literal), literal) == 0)
      return what + " (" + literal + " is not a JSON number: the values of a config.json are finite numbers)";
  return what;
}

}  // namespace

ModelConfig model_config_from_hf(const std::string& config_json, const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(config_json);
  } catch (const nlohmann::json::parse_error& e) {
    TRI_CHECK(false, where, ": not JSON: ", parse_error_text(e, config_json));
  }
  TRI_CHECK(j.is_object() && j.contains("model_type") && j.at("model_type").is_string(), where,
            ": no \"model_type\" string (a Hugging Face config.json names its model type)");
  const std::string type = j.at("model_type").get<std::string>();
  std::string known;
  for (const ModelFamily& f : model_families())
    for (const std::string& t : f.hf_model_types) {
      if (t == type) {
        ModelConfig cfg = f.from_hf_config(config_json, where);
        try {  // the checks across keys (n_embd divisible by n_head, ...), as for a TOML config
          cfg.validate();
        } catch (const Error& e) {
          TRI_CHECK(false, where, ": ", e.message());
        }
        return cfg;
      }
      known += (known.empty() ? "" : ", ") + t;
    }
  TRI_CHECK(false, where, ": model_type \"", type, "\" is not a family trident trains; it reads: ", known);
}

OptionValue hf_config_value(const nlohmann::json& value, const std::string& json_key, const std::string& arch,
                            const std::string& key, const std::string& where) {
  ModelConfig of_arch;
  of_arch.arch = arch;
  const OptionField* field = nullptr;
  for (const OptionField& f : of_arch.fields())
    if (f.key == key) field = &f;
  TRI_ASSERT(field != nullptr, "model.arch = \"", arch, "\" has no key '", key, "'");
  // The [model] key it sets, when config.json names it otherwise.
  const std::string as = json_key == key ? "" : " (model." + key + ")";
  const std::string shown = "\"" + json_key + "\"";
  auto bad = [&](const std::string& why) {
    TRI_CHECK(false, where, ": ", shown, " = ", value.dump(), " is invalid: ", why, as);
  };
  OptionValue v;
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    bad("too large (the largest allowed is 2^63 - 1)");
  else if (value.is_number_integer()) v = value.get<int64_t>();
  else if (value.is_number_float()) v = value.get<double>();
  else if (value.is_boolean()) v = value.get<bool>();
  else if (value.is_string()) v = value.get<std::string>();
  else bad(std::string("expected ") + option_type_name(field->type));
  OptionField named = *field;
  named.key = shown;
  StatusOr<OptionValue> checked = named.check(v, where);
  TRI_CHECK(checked.is_ok(), checked.status().message(), as);
  return checked.value();
}

namespace {

// Note [A model larger than the machine]
// Every run builds its model whole, in f32, before any strategy splits it. A model whose
// weights alone exceed the machine's memory (model.n_layer = 1000000, a config.json with 10^12
// layers) allocated block after block until the allocator failed, minutes later or never
// (swap). Its size is known from the family's shapes without building it: those of one and two
// blocks give the embeddings and head and one block, the rest is the block times n_layer.
double parameter_elements(const ModelFamily& family, ModelConfig cfg, int64_t layers) {
  cfg.n_layer = layers;
  double n = 0.0;
  for (const ParameterShape& p : family.shapes(cfg).parameters) {
    double e = 1.0;
    for (const int64_t d : p.shape) e *= d > 0 ? static_cast<double>(d) : std::numeric_limits<double>::infinity();
    n += e;
  }
  return n;
}

void check_fits_in_memory(const ModelConfig& cfg) {
  const ModelFamily& family = model_family(cfg.arch);
  const double one = parameter_elements(family, cfg, 1), block = parameter_elements(family, cfg, 2) - one;
  const double params = one + static_cast<double>(cfg.n_layer - 1) * block;
  const double bytes = 4.0 * params;
  const double memory = host_memory_bytes();  // 0: unknown
  TRI_CHECK(memory == 0 || bytes <= memory, "model.arch = \"", cfg.arch, "\" with model.n_layer = ", cfg.n_layer,
            ", model.n_embd = ", cfg.n_embd, ", model.vocab_size = ", cfg.vocab_size, " has ", params,
            " parameters: their f32 weights alone (", bytes, " bytes) exceed this machine's memory (", memory,
            " bytes), and every run builds the whole model before splitting it");
}

}  // namespace

std::unique_ptr<CausalLM> build_model(const ModelConfig& cfg) {
  cfg.validate();
  check_fits_in_memory(cfg);
  return model_family(cfg.arch).build(cfg);
}

}  // namespace trident::models
