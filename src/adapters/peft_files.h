// Hugging Face PEFT's LoRA adapter files, read and written: adapter_config.json (PEFT's
// LoraConfig fields) and adapter_model.safetensors, whose tensors are named as PEFT saves them:
// "base_model.model." + the layer's path in transformers' *ForCausalLM + ".lora_A.weight" /
// ".lora_B.weight" (the adapter name, "default", is not in the file). What
// `PeftModel.from_pretrained(base, dir)` loads, and what it writes with save_pretrained.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "adapters/lora.h"
#include "adapters/lora_options.h"
#include "checkpoint/safetensors.h"
#include "core/status.h"
#include "models/causal_lm.h"

namespace trident::adapters {

inline constexpr const char* kPeftConfigFile = "adapter_config.json";
inline constexpr const char* kPeftWeightsFile = "adapter_model.safetensors";

// An adapter as read from a directory.
struct PeftAdapter {
  std::string dir;
  LoraOptions options;  // r, alpha (lora_alpha), dropout (lora_dropout), use_rslora
  LoraTargets targets;  // target_modules
  std::string base_model;  // base_model_name_or_path ("" when null)
  std::vector<checkpoint::NamedTensor> tensors;  // PEFT's names
};

// The name in PEFT's files of trident adapter parameter `name` of a model of `cfg`
// ("layers.0.self_attn.q_proj.lora_A.weight" ->
// "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight").
std::string peft_tensor_name(const models::ModelConfig& cfg, const std::string& name);

// adapter_config.json for adapters `layers` made with `options` on a model of `cfg`; the
// target_modules are options' names, or (for globs) the adapted layers' Hugging Face paths.
std::string peft_config_json(const models::ModelConfig& cfg, const LoraOptions& options,
                             const std::vector<LoraLayerInfo>& layers, const std::string& base_model);

// Writes `dir` (created if needed) with adapter_model.safetensors (`tensors`, trident's adapter
// parameters by trident name, renamed to PEFT's) and adapter_config.json, each written to a
// temporary name, synced and renamed.
Status write_peft_adapter(const std::string& dir, const models::ModelConfig& cfg, const std::string& config_json,
                          std::span<const checkpoint::NamedTensor> tensors);

// Reads `dir`. Errors name the file and the field: not a LoRA adapter, fields trident does not
// implement (DoRA, trained biases, modules_to_save, per-layer ranks), a missing or malformed
// field.
StatusOr<PeftAdapter> read_peft_adapter(const std::string& dir);

// The [lora] options a run uses when it starts from `adapter`: the adapter's rank, alpha, rsLoRA
// and targets; `configured` (the run's [lora]) may leave r at 0, or must agree with the file.
// lora.dropout and lora.init_seed are the run's when it sets lora.r, else the file's dropout.
StatusOr<LoraOptions> lora_options_for(const PeftAdapter& adapter, const LoraOptions& configured);

// Copies the adapter's tensors into the adapters of `model` (apply_lora'd from the same
// targets): every adapter parameter must be given once, with its shape. Errors name the file
// and the tensor.
Status load_peft_weights(models::CausalLM& model, const PeftAdapter& adapter);

}  // namespace trident::adapters
