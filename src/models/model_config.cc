#include "models/model_config.h"

#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "core/check.h"
#include "models/registry.h"

namespace trident::models {
namespace {

const FamilyKey& family_key(const ModelConfig& cfg, const std::string& key) {
  for (const FamilyKey& k : model_family(cfg.arch).keys)
    if (k.field.key == key) return k;
  TRI_CHECK(false, "model.arch = \"", cfg.arch, "\" has no key '", key, "'");
}

std::vector<std::string> family_names() {
  std::vector<std::string> names;
  for (const ModelFamily& f : model_families()) names.push_back(f.arch);
  return names;
}

// The section's fields for one family: the common table's, with `arch` resetting the family's
// keys when it changes, then the family's, reading and writing ModelConfig::family_values.
// Each records its key in ModelConfig::given_keys when set.
std::vector<OptionField> fields_for(const std::string& arch) {
  std::vector<OptionField> out = ModelConfig::table().fields();
  for (OptionField& f : out) {
    if (f.key != ModelConfig::kSelectorKey) continue;
    f.set = [](void* o, const OptionValue& v) {
      auto* cfg = static_cast<ModelConfig*>(o);
      const std::string& arch = std::get<std::string>(v);
      if (cfg->arch != arch) {
        for (const auto& [key, value] : cfg->family_values) cfg->given_keys.erase(key);
        cfg->family_values.clear();
      }
      cfg->arch = arch;
    };
  }
  for (const FamilyKey& k : model_family(arch).keys) {
    OptionField f = k.field;
    f.get = [key = f.key](const void* o) { return static_cast<const ModelConfig*>(o)->family_value(key); };
    f.set = [key = f.key](void* o, const OptionValue& v) { static_cast<ModelConfig*>(o)->family_values[key] = v; };
    out.push_back(std::move(f));
  }
  for (OptionField& f : out)
    f.set = [set = std::move(f.set), key = f.key](void* o, const OptionValue& v) {
      set(o, v);
      static_cast<ModelConfig*>(o)->given_keys.insert(key);
    };
  return out;
}

}  // namespace

OptionValue ModelConfig::family_value(const std::string& key) const {
  const FamilyKey& k = family_key(*this, key);
  const auto it = family_values.find(key);
  return it != family_values.end() ? it->second : k.default_value;
}

double ModelConfig::family_float(const std::string& key) const {
  const OptionValue v = family_value(key);
  if (const int64_t* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return std::get<double>(v);
}
int64_t ModelConfig::family_int(const std::string& key) const { return std::get<int64_t>(family_value(key)); }
bool ModelConfig::family_bool(const std::string& key) const { return std::get<bool>(family_value(key)); }
std::string ModelConfig::family_string(const std::string& key) const {
  return std::get<std::string>(family_value(key));
}

void check_common_model_keys(int64_t n_embd, int64_t n_head, const std::string& activation_checkpointing) {
  TRI_CHECK(n_head >= 1, "model: n_head (", n_head, ") must be at least 1");  // before dividing by it
  TRI_CHECK(n_embd % n_head == 0, "model: n_embd (", n_embd, ") must be divisible by n_head (", n_head, ")");
  TRI_CHECK(activation_checkpointing == "none" || activation_checkpointing == "selective" ||
                activation_checkpointing == "full",
            "model: activation_checkpointing is \"", activation_checkpointing,
            "\"; allowed: \"none\", \"selective\", \"full\"");
}

void ModelConfig::validate() const {
  const ModelFamily& family = model_family(arch);  // throws for an unknown arch
  check_common_model_keys(n_embd, n_head, activation_checkpointing);
  for (const auto& [key, value] : family_values) family_key(*this, key);  // a key of another family
  if (family.validate) family.validate(*this);
}

const OptionTable<ModelConfig>& ModelConfig::table() {
  static const auto t =
      OptionTable<ModelConfig>("model", "The model: its family (arch), shape and init; the family's own keys follow")
          .add("arch", &ModelConfig::arch, "model family (models/registry.h); set it first: the keys below follow it",
               family_names())
          .add("n_layer", &ModelConfig::n_layer, "number of transformer blocks", Range::at_least(1))
          .add("n_head", &ModelConfig::n_head, "attention (query) heads per block", Range::at_least(1))
          .add("n_embd", &ModelConfig::n_embd, "model width; divisible by n_head", Range::at_least(1))
          .add("block_size", &ModelConfig::block_size, "context length: the longest sequence", Range::at_least(1))
          .add("vocab_size", &ModelConfig::vocab_size, "vocabulary size (50257 for GPT-2's BPE)", Range::at_least(1))
          .add("dropout", &ModelConfig::dropout, "dropout probability while training", Range::between(0.0, 0.999))
          .add("init_std", &ModelConfig::init_std, "std of the normal init", Range::positive())
          .add("init_seed", &ModelConfig::init_seed, "seed of the initial weights", Range::non_negative())
          .add("activation_checkpointing", &ModelConfig::activation_checkpointing,
               "per block: keep every activation (none), recompute all but the matmul outputs (selective), "
               "keep only the block input (full)",
               {"none", "selective", "full"});
  return t;
}

const std::vector<OptionField>& ModelConfig::fields() const {
  // One list per family, built once: ConfigTree holds references to them.
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<const std::vector<OptionField>>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto& entry = cache[arch];
  if (!entry) entry = std::make_unique<const std::vector<OptionField>>(fields_for(arch));
  return *entry;
}

std::string ModelConfig::help_extra() const {
  std::ostringstream os;
  for (const ModelFamily& f : model_families()) {
    if (f.keys.empty() || f.arch == arch) continue;  // the chosen family's keys are listed above
    os << "  with --model.arch=" << f.arch << " (" << f.doc << "):\n";
    for (const FamilyKey& k : f.keys)
      os << "    --model." << k.field.key << "=" << option_value_str(k.default_value) << "\n        " << k.field.doc
         << "\n";
  }
  return os.str();
}

}  // namespace trident::models
