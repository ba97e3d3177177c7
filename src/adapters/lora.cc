#include "adapters/lora.h"

#include <cmath>
#include <map>
#include <regex>

#include "autograd/functions.h"
#include "core/check.h"
#include "core/copy.h"
#include "core/options.h"
#include "models/registry.h"
#include "nn/freeze.h"
#include "nn/init.h"
#include "nn/linear.h"

namespace trident::adapters {
namespace {

constexpr const char* kAllLinear = "all-linear";

// Note [The LoRA wrapper]
// The layer below is asked for its product with the bias but without the activation: the
// adapter's update joins the pre-activation sum, as in PEFT (GPT-2's c_fc: gelu(W x + b + s B A x)).
// scaling * (B (A x)) is computed as PEFT does (lora_B(lora_A(dropout(x))) * scaling). With B
// zero the update is +0.0 everywhere, so the sum is the base's product (a -0.0 becomes +0.0,
// which compares equal).
class LoraWrapper final : public nn::LinearWrapper {
 public:
  LoraWrapper(std::shared_ptr<nn::Linear> a, std::shared_ptr<nn::Linear> b, double scaling, double dropout,
              Generator& dropout_gen)
      : a_(std::move(a)), b_(std::move(b)), scaling_(scaling), dropout_(dropout), gen_(dropout_gen) {}
  nn::WrapperKind kind() const override { return nn::WrapperKind::kAdapter; }
  std::string name() const override { return "lora"; }
  std::vector<nn::AdapterFactor> factors() const override {
    return {{"lora_A", nn::FactorSide::kInput}, {"lora_B", nn::FactorSide::kOutput}};
  }

  Tensor forward(const Tensor& x, const nn::LayerParams& p, const nn::LinearCall& call,
                 const nn::LinearInner& inner) const override {
    const Tensor base = inner.forward(x, p, {.bias = call.bias, .act = nn::Activation::kNone});
    const bool drop = dropout_ > 0.0 && a_->is_training();
    const Tensor h = a_->forward(drop ? trident::dropout(x, dropout_, gen_, true) : x);
    const Tensor update = trident::affine(b_->forward(h), scaling_, 0.0);
    const Tensor y = trident::add(base, update);
    return call.act == nn::Activation::kGeluTanh ? trident::gelu_tanh(y) : y;
  }

 private:
  std::shared_ptr<nn::Linear> a_, b_;
  double scaling_, dropout_;
  Generator& gen_;
};

// Globs over trident's path; a name's suffix rule over trident's or Hugging Face's.
bool item_matches(const std::string& item, const std::string& path, const std::string& hf_path) {
  return nn::names_module(item, path) || (!nn::is_glob(item) && nn::ends_with_component(hf_path, item));
}

// in, out and the layout of a linear layer, or nullopt for any other module.
std::optional<LoraLayerInfo> linear_info(const std::string& path, nn::Module& m) {
  if (auto* l = dynamic_cast<nn::Linear*>(&m)) return LoraLayerInfo{path, l->weight().size(1), l->weight().size(0), false};
  if (auto* c = dynamic_cast<nn::Conv1D*>(&m)) return LoraLayerInfo{path, c->weight().size(0), c->weight().size(1), true};
  return std::nullopt;
}

}  // namespace

std::string LoraTargets::str() const {
  if (regex) return "\"" + *regex + "\"";
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

std::string hf_module_path(const models::ModelConfig& cfg, const std::string& path) {
  const models::ModelFamily& family = models::model_family(cfg.arch);
  std::string name = family.hf_name(cfg, path + ".weight");
  name.resize(name.size() - std::string(".weight").size());
  return family.hf_causal_lm_prefix + name;
}

bool is_lora_parameter(const std::string& name) {
  return name.ends_with(".lora_A.weight") || name.ends_with(".lora_B.weight");
}

std::string lora_layer_path(const std::string& name) {
  TRI_CHECK(is_lora_parameter(name), "'", name, "' is not a LoRA parameter");
  return name.substr(0, name.size() - std::string(".lora_A.weight").size());
}

std::vector<LoraLayerInfo> select_lora_layers(const std::vector<LoraCandidate>& modules, const LoraTargets& targets,
                                              const models::ModelConfig& cfg) {
  std::optional<std::regex> regex;
  if (targets.regex) {
    try {
      regex.emplace(*targets.regex, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      TRI_CHECK(false, "lora target_modules \"", *targets.regex, "\" is not a regular expression: ", e.what());
    }
  }
  std::vector<LoraLayerInfo> adapted;
  std::vector<std::string> paths;
  std::vector<bool> item_used(targets.items.size(), false);
  for (const LoraCandidate& m : modules) {
    paths.push_back(m.path);
    const std::string hf = hf_module_path(cfg, m.path);
    bool wanted = regex && std::regex_match(hf, *regex);
    for (size_t i = 0; i < targets.items.size(); ++i) {
      const std::string& item = targets.items[i];
      const bool hit = item == kAllLinear ? m.linear.has_value() && m.path != "lm_head" : item_matches(item, m.path, hf);
      if (hit) item_used[i] = true;
      wanted = wanted || hit;
    }
    if (!wanted) continue;
    TRI_CHECK(m.linear.has_value(), "lora.target_modules (", targets.str(), ") names layer '", m.path,
              "', which is not a linear layer: only linear layers (Linear, GPT-2's Conv1D) take adapters");
    adapted.push_back(*m.linear);
  }
  for (size_t i = 0; i < targets.items.size(); ++i) {
    if (item_used[i]) continue;
    const std::optional<std::string> near = closest_match(targets.items[i], paths);
    TRI_CHECK(false, "lora.target_modules: '", targets.items[i], "' matches no layer of the model",
              near ? " (did you mean '" + *near + "'?)" : "", "; a name matches a layer whose path ends with it");
  }
  TRI_CHECK(!adapted.empty(), "lora.target_modules (", targets.str(), ") matches no layer of the model");
  return adapted;
}

std::vector<LoraLayerInfo> apply_lora(models::CausalLM& model, const LoraOptions& options,
                                      const std::optional<LoraTargets>& given) {
  options.validate();
  TRI_CHECK(options.enabled(), "apply_lora: lora.r is 0");
  const LoraTargets targets = given.value_or(LoraTargets::from(options));
  for (const auto& [name, p] : model.named_parameters())
    TRI_CHECK(!is_lora_parameter(name), "apply_lora: the model has adapters already ('", name, "')");
  std::vector<LoraCandidate> modules;
  std::map<std::string, nn::LinearLayer*> linear;
  for (const auto& [path, module] : model.named_modules()) {
    modules.push_back({path, linear_info(path, *module)});
    if (modules.back().linear) linear[path] = static_cast<nn::LinearLayer*>(module);
  }
  const std::vector<LoraLayerInfo> adapted = select_lora_layers(modules, targets, model.model_config());

  // The base is frozen: everything there is now; the adapters, added below, train.
  for (const auto& [name, p] : model.named_parameters()) Tensor(p).set_requires_grad(false);
  Generator init(static_cast<uint64_t>(options.init_seed));
  const double scaling = options.scaling();
  for (size_t i = 0; i < adapted.size(); ++i) {
    const LoraLayerInfo& layer = adapted[i];
    nn::LinearLayer* m = linear.at(layer.path);
    auto a = std::make_shared<nn::Linear>(layer.in, options.r, /*bias=*/false);
    auto b = std::make_shared<nn::Linear>(options.r, layer.out, /*bias=*/false);
    {
      autograd::NoGradGuard no_grad;
      const double bound = 1.0 / std::sqrt(static_cast<double>(layer.in));  // kaiming_uniform_(a=sqrt(5))
      uniform_(a->weight(), init, -bound, bound);
    }
    m->add_module("lora_A", a);
    m->add_module("lora_B", b);
    m->add_wrapper(
        std::make_shared<LoraWrapper>(a, b, scaling, options.dropout, model.dropout_generator()));
  }
  return adapted;
}

Tensor merge_lora_weight(const Tensor& weight, const Tensor& a, const Tensor& b, double scaling, bool in_out) {
  TRI_CHECK(weight.dim() == 2 && a.dim() == 2 && b.dim() == 2 && a.size(0) == b.size(1), "merge_lora_weight: weight ",
            weight.shape(), ", lora_A ", a.shape(), ", lora_B ", b.shape(), " do not form W + B A");
  const int64_t in = a.size(1), out = b.size(0);
  TRI_CHECK(in_out ? weight.size(0) == in && weight.size(1) == out : weight.size(0) == out && weight.size(1) == in,
            "merge_lora_weight: weight ", weight.shape(), " is not ", in_out ? "(in, out)" : "(out, in)", " for lora_A ",
            a.shape(), " and lora_B ", b.shape());
  autograd::NoGradGuard no_grad;
  const Tensor delta = trident::affine(trident::matmul(core::cast(b, DType::kF32), core::cast(a, DType::kF32)), scaling, 0.0);
  const Tensor d = in_out ? core::contiguous(trident::transpose(delta, 0, 1)) : delta;
  return core::cast(trident::add(core::cast(weight, DType::kF32), d), weight.dtype());
}

}  // namespace trident::adapters
