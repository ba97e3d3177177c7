#include "quantization/quantize_layers.h"

#include "core/allocator.h"
#include "core/check.h"
#include "core/views.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "quantization/quantization_options.h"
#include "quantization/quantized_view.h"

namespace trident::quantization {
namespace {

struct Layer {
  std::string param;
  nn::LinearLayer* layer;
  bool conv1d;  // (in, out)
};

// The linear layer whose weight is `param`, or throws naming it.
Layer find_layer(nn::Module& model, const std::string& param) {
  const std::string suffix = ".weight";
  TRI_CHECK(param.ends_with(suffix), "'", param, "' is not a linear layer's weight (no '.weight' at its end)");
  const std::string path = param.substr(0, param.size() - suffix.size());
  for (const auto& [p, module] : model.named_modules()) {
    if (p != path) continue;
    auto* layer = dynamic_cast<nn::LinearLayer*>(module);
    TRI_CHECK(layer != nullptr, "'", param, "' is not a linear layer's weight: '", path, "' is not a linear layer");
    return {param, layer, dynamic_cast<nn::Conv1D*>(module) != nullptr};
  }
  TRI_CHECK(false, "the model has no layer '", path, "' (for the quantized weight '", param, "')");
}

// The embedding whose table is `table` ("wte.weight"), the model's tied head, or throws naming `param`.
nn::Embedding& find_tied_table(models::CausalLM& model, const std::string& table, const std::string& param) {
  const std::optional<std::string> tied = model.tied_head_weight();
  TRI_CHECK(tied && *tied == table, "'", param, "' is a head tied to '", table, "', but the model's head is ",
            tied ? "tied to '" + *tied + "'" : std::string("not tied to its embedding"));
  const std::string path = table.substr(0, table.size() - std::string(".weight").size());
  for (const auto& [p, module] : model.named_modules())
    if (p == path)
      if (auto* e = dynamic_cast<nn::Embedding*>(module)) return *e;
  TRI_CHECK(false, "'", param, "': the model has no embedding '", path, "' (the table its head is tied to)");
}

// Checks that releasing the weight frees its memory (it is not a view of, or shared with, another).
void check_releasable(const Tensor& w, const std::string& param) {
  TRI_CHECK(w.impl().storage().use_count() == 1 &&
                w.impl().storage()->nbytes() == static_cast<size_t>(w.numel()) * element_size(w.dtype()),
            "'", param, "' shares its memory with other tensors (", w.str(), ", storage of ", w.impl().storage()->nbytes(),
            " bytes held by ", w.impl().storage().use_count(), " views; a tied weight?): quantizing it would free "
            "nothing; leave it in full precision (--skip)");
}

void apply(const Layer& l, const QuantizedParameter& q) {
  Tensor w = l.layer->parameter("weight");
  TRI_CHECK(w.impl().storage()->nbytes() > 0 || w.numel() == 0, "'", q.param, "' is quantized already");
  check_releasable(w, q.param);
  TRI_CHECK(!q.transposed || l.conv1d, "'", q.param, "' is stored transposed, but its layer is not a Conv1D");
  add_quantized_view(*l.layer, q.weight, w, l.conv1d && !q.transposed, q.param);
  w.impl().storage()->reset_data(DataPtr());
}

}  // namespace

std::vector<QuantizedParameter> quantize_layers(models::CausalLM& model, const QuantScheme& scheme,
                                                const std::string& skip, const std::string& skip_where) {
  std::vector<std::string> paths, linear_paths;
  std::vector<Layer> linear;
  for (const auto& [path, module] : model.named_modules()) {
    paths.push_back(path);
    auto* layer = dynamic_cast<nn::LinearLayer*>(module);
    if (layer == nullptr) continue;
    linear_paths.push_back(path);
    linear.push_back({path + ".weight", layer, dynamic_cast<nn::Conv1D*>(module) != nullptr});
  }
  // A tied head is the layer "lm_head" for the skip list (Note [What stays in full precision]).
  const std::optional<std::string> tied = model.tied_head_weight();
  const std::string head_path = std::string(kTiedHeadParam).substr(0, std::string(kTiedHeadParam).find_last_of('.'));
  if (tied) {
    linear_paths.push_back(head_path);
    paths.push_back(head_path);
  }
  QuantizationOptions options;
  options.skip_modules = skip;
  const std::vector<bool> skipped = options.skips(linear_paths, paths, skip_where);
  std::vector<QuantizedParameter> out;
  std::vector<const Layer*> chosen;
  for (size_t k = 0; k < linear.size(); ++k) {
    if (skipped[k]) continue;
    const Layer& l = linear[k];
    const Tensor w = l.layer->parameter("weight");
    if (w.numel() == 0) continue;
    TRI_CHECK(w.impl().storage()->nbytes() > 0, "'", l.param, "' is quantized already");
    check_releasable(w, l.param);
    const bool transposed = l.conv1d && scheme.blocks_along_input;
    MemoryCategoryGuard category(MemoryCategory::kParameter);
    // On the weight's device: a scheme whose kernels are the host's refuses another here, by name.
    out.push_back({l.param, scheme.quantize(transposed ? views::transpose(w, 0, 1) : w, l.param)->to(w.device()), transposed, ""});
    chosen.push_back(&l);
  }
  std::optional<QuantizedParameter> head;
  if (tied && !skipped.back()) {
    nn::Embedding& table = find_tied_table(model, *tied, kTiedHeadParam);
    for (const std::string& name : table.wrapper_names())
      TRI_CHECK(name != "quantized", "'", kTiedHeadParam, "' is quantized already");
    MemoryCategoryGuard category(MemoryCategory::kParameter);
    head = QuantizedParameter{kTiedHeadParam, scheme.quantize(table.weight(), kTiedHeadParam)->to(table.weight().device()),
                              false, *tied};
  }
  for (size_t i = 0; i < out.size(); ++i) apply(*chosen[i], out[i]);
  if (head) {
    add_quantized_head(find_tied_table(model, head->tied_to, head->param), head->weight, head->param);
    out.push_back(*head);
  }
  return out;
}

void apply_quantized_layer(models::CausalLM& model, const QuantizedParameter& q) {
  if (!q.tied_to.empty()) {
    TRI_CHECK(!q.transposed, "'", q.param, "' is a tied head, stored as its table is (not transposed)");
    add_quantized_head(find_tied_table(model, q.tied_to, q.param), q.weight, q.param);
    return;
  }
  apply(find_layer(model, q.param), q);
}

}  // namespace trident::quantization
