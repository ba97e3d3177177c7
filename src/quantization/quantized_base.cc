#include "quantization/quantized_base.h"

#include "autograd/functions.h"
#include "core/allocator.h"
#include "core/check.h"
#include "nn/freeze.h"
#include "nn/linear.h"
#include "quantization/quantized_view.h"

namespace trident::quantization {

bool QuantizedBase::contains(const std::string& param) const {
  for (const QuantizedLayer& l : layers_)
    if (l.param == param) return true;
  return false;
}

Tensor QuantizedBase::dequantized(const std::string& param) const {
  for (const QuantizedLayer& l : layers_)
    if (l.param == param) return l.weight->dequantize();
  TRI_CHECK(false, "'", param, "' is not stored in NF4");
}

int64_t QuantizedBase::params() const {
  int64_t n = 0;
  for (const QuantizedLayer& l : layers_) n += l.weight->numel();
  return n;
}

int64_t QuantizedBase::bytes() const {
  int64_t n = 0;
  for (const QuantizedLayer& l : layers_) n += l.weight->bytes();
  return n;
}

QuantizedBase quantize_base(nn::Module& model, const QuantizationOptions& options,
                            const std::function<bool(const std::string& param)>& here) {
  TRI_CHECK(options.enabled(), "quantize_base: quantization.base = \"", options.base, "\"");
  // Everything is checked before the first weight is released: an error leaves the model whole.
  std::vector<std::string> paths, linear_paths;
  std::vector<std::pair<std::string, nn::Module*>> linear;
  for (const auto& [path, module] : model.named_modules()) {
    paths.push_back(path);
    if (dynamic_cast<nn::LinearLayer*>(module) == nullptr) continue;
    linear_paths.push_back(path);
    linear.emplace_back(path, module);
  }
  const std::vector<bool> skipped = options.skips(linear_paths, paths);
  struct Candidate {
    std::string param;
    nn::LinearLayer* layer;
    Tensor weight;
    bool in_out;
  };
  std::vector<Candidate> chosen;
  bool any_linear = false;
  for (size_t k = 0; k < linear.size(); ++k) {
    const auto& [path, module] = linear[k];
    auto* layer = dynamic_cast<nn::LinearLayer*>(module);
    const std::string param = path + ".weight";
    Tensor w = module->parameter("weight");
    any_linear = any_linear || here(param);
    if (skipped[k] || !here(param) || w.requires_grad() || w.numel() == 0) continue;
    for (const std::string& name : layer->wrapper_names())
      TRI_CHECK(name != "quantized", "quantization.base = \"nf4\": '", param, "' is quantized already");
    TRI_CHECK(w.impl().storage().use_count() == 1 &&
                  w.impl().storage()->nbytes() == static_cast<size_t>(w.numel()) * element_size(w.dtype()),
              "quantization.base = \"nf4\": '", param, "' shares its memory with other tensors (", w.str(), ", storage of ",
              w.impl().storage()->nbytes(), " bytes held by ", w.impl().storage().use_count(),
              " views), so quantizing it would free nothing");
    chosen.push_back({param, layer, w, dynamic_cast<nn::Conv1D*>(module) != nullptr});
  }
  TRI_CHECK(!chosen.empty() || !any_linear, "quantization.base = \"nf4\" stores frozen linear layers in 4 bits, but no "
            "linear layer of the model is frozen (outside quantization.skip_modules = \"", options.skip_modules,
            "\"): train adapters on the base ([lora] r > 0) or freeze it (train.freeze)");

  std::vector<QuantizedLayer> layers;
  for (Candidate& c : chosen) {
    std::shared_ptr<const QuantizedWeight> q;
    {
      MemoryCategoryGuard category(MemoryCategory::kParameter);
      q = Nf4Weight::quantize(c.weight, options.double_quant, c.param).to(c.weight.device());
    }
    add_quantized_view(*c.layer, q, c.weight, c.in_out, c.param);
    c.weight.impl().storage()->reset_data(DataPtr());
    layers.push_back({c.param, std::move(q)});
  }
  return QuantizedBase(std::move(layers));
}

}  // namespace trident::quantization
