// LoRA (Hu et al. 2021, as Hugging Face PEFT computes it): a frozen linear layer W gets a
// trainable low-rank update, y = W x + b + scaling * B A dropout(x), with A (r, in) drawn as
// PEFT draws it (Kaiming-uniform with a = sqrt(5): U(-1/sqrt(in), 1/sqrt(in))) and B (out, r)
// zero, so the adapted model starts as the base exactly.
//
// Applied from outside the model (nn/wrapper.h): the layer gets two child modules, lora_A and
// lora_B (nn::Linear without bias: their weights are PEFT's lora_A.weight and lora_B.weight,
// "h.0.attn.c_attn.lora_A.weight"), and a wrapper of the adapter kind that adds their product
// to the layer's. Every other parameter of the model is frozen (nn/freeze.h), so optimizers,
// data parallelism, ZeRO and checkpoints see only the adapters as trainable.
//
// Note [LoRA targets]
// lora.target_modules items, as PEFT's target_modules list: a name matches a layer whose path
// is the name or ends with "." + name, in trident's names or Hugging Face's ("q_proj",
// "attn.c_attn", "model.layers.0.self_attn.q_proj"); an item with '*' or '?' is a glob over
// trident's whole path ("layers.1*.mlp.*"); "all-linear" is every linear layer but the LM head.
// A PEFT file's target_modules may instead be one regular expression, matched against the whole
// Hugging Face module path (re.fullmatch). Every item must match a layer, and every layer matched
// must be linear (an Embedding or a norm takes no adapter): otherwise an error naming the item or
// the layer.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "adapters/lora_options.h"
#include "core/tensor.h"
#include "models/causal_lm.h"

namespace trident::adapters {

// Which layers get adapters (Note [LoRA targets]).
struct LoraTargets {
  std::vector<std::string> items;  // names, globs, "all-linear"
  std::optional<std::string> regex;  // a PEFT file's single pattern
  static LoraTargets from(const LoraOptions& options) { return {options.targets(), std::nullopt}; }
  // "q_proj, v_proj", or the regex in quotes.
  std::string str() const;
};

// The module path PEFT's files use for trident module path `path` of a model of `cfg`
// ("layers.0.self_attn.q_proj" -> "model.layers.0.self_attn.q_proj"; GPT-2's "h.0.attn.c_attn"
// -> "transformer.h.0.attn.c_attn").
std::string hf_module_path(const models::ModelConfig& cfg, const std::string& path);

// One adapted layer.
struct LoraLayerInfo {
  std::string path;  // the layer's module path ("h.0.attn.c_attn")
  int64_t in = 0, out = 0;
  bool in_out = false;  // its weight is (in, out) (Hugging Face's Conv1D), else (out, in)
};

// A module a target may name: its path and, for a linear layer, its features.
struct LoraCandidate {
  std::string path;
  std::optional<LoraLayerInfo> linear;  // nullopt: not a linear layer (an Embedding, a norm, a block)
};

// The layers `targets` names among `modules` (every module of a model of `cfg`, in model order):
// what apply_lora adapts, by Note [LoRA targets]. Throws naming an item that matches no module,
// or a module named that is not linear. The planner calls it on the modules a family's shapes
// name (planner/fine_tuning.h), so that it predicts the adapters the trainer makes.
std::vector<LoraLayerInfo> select_lora_layers(const std::vector<LoraCandidate>& modules, const LoraTargets& targets,
                                              const models::ModelConfig& cfg);

// Adds an adapter of rank options.r to every layer `targets` names (options.target_modules when
// not given), draws A from options.init_seed and zeroes B, and freezes every other parameter.
// Returns the adapted layers in model order. Throws naming the item or layer that cannot be
// adapted. Call on the whole single-device model, before parallelization.
std::vector<LoraLayerInfo> apply_lora(models::CausalLM& model, const LoraOptions& options,
                                      const std::optional<LoraTargets>& targets = std::nullopt);

// Whether parameter `name` is an adapter's ("....lora_A.weight", "....lora_B.weight").
bool is_lora_parameter(const std::string& name);
// The adapted layer's path of an adapter parameter ("h.0.attn.c_attn.lora_A.weight" ->
// "h.0.attn.c_attn").
std::string lora_layer_path(const std::string& name);

// The base weight with its adapter merged: W + scaling * B A, transposed for an (in, out)
// weight. fp32 arithmetic, in W's dtype; no autograd. Throws when the shapes do not fit.
Tensor merge_lora_weight(const Tensor& weight, const Tensor& a, const Tensor& b, double scaling, bool in_out);

}  // namespace trident::adapters
