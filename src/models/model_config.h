// The [model] section of a training config: which family builds the model (`arch`, a name in
// models/registry.h), the keys every causal LM family has (its shape, dropout, init, activation
// checkpointing), and the chosen family's own keys (GPT-2's layer_norm_eps; LLaMA's kv heads,
// RoPE, ...), which appear in the section beside the common ones: `--model.arch=gpt2
// --model.layer_norm_eps=1e-6`. The code above models/ (trainer, parallel plans, planner, CLI)
// reads only the common keys; a family reads its own through family_value().
//
// Changing `arch` resets the family's keys to the new family's defaults; config files and
// command lines set it before the section's other keys (config/config_tree.h).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/options.h"

namespace trident::models {

// One key of a family's own: its field (key, doc, type, range or choices; get/set unused) and
// its default.
struct FamilyKey {
  OptionField field;
  OptionValue default_value;
};

struct ModelConfig {
  std::string arch = "gpt2";        // the family (models/registry.h)
  int64_t n_layer = 12;             // transformer blocks (L)
  int64_t n_head = 12;              // attention (query) heads per block (NH)
  int64_t n_embd = 768;             // model width (C)
  int64_t block_size = 1024;        // context length: the longest sequence
  int64_t vocab_size = 50257;       // V
  double dropout = 0.0;             // while training (where the family applies it)
  double init_std = 0.02;           // std of the normal init
  int64_t init_seed = 1337;         // seed of the initial weights
  // Activation checkpointing per block: "none", "selective" (recompute norms, attention and
  // activations; keep matmul outputs) or "full" (keep only each block's input). Changes memory
  // and speed, never the numbers.
  std::string activation_checkpointing = "none";
  // The family's own keys that were set; the others have the family's defaults.
  std::map<std::string, OptionValue> family_values;
  // The keys a config file or the command line set (through fields(): config/config_tree.h),
  // common or the family's own: a Hugging Face directory's config.json must agree with them
  // (train/hf_model_dir.h).
  std::set<std::string> given_keys;

  static constexpr const char* kSelectorKey = "arch";

  int64_t head_size() const { return n_embd / n_head; }
  // A key of the family's own: its value, or the family's default (throws for a key the family
  // does not have).
  OptionValue family_value(const std::string& key) const;
  double family_float(const std::string& key) const;
  int64_t family_int(const std::string& key) const;
  bool family_bool(const std::string& key) const;
  std::string family_string(const std::string& key) const;

  // The common checks (n_embd divisible by n_head, ...), then the family's own; throws naming
  // the keys and values.
  void validate() const;

  // The common keys (config/ConfigTree binds the section by it).
  static const OptionTable<ModelConfig>& table();
  // The keys the section has now: the common ones, then `arch`'s own.
  const std::vector<OptionField>& fields() const;
  // Every family's own keys, for --help-config.
  std::string help_extra() const;
};

// The checks every family's config makes of the common keys (its own validate() may run on a
// config built in code, without ModelConfig's): n_head >= 1 dividing n_embd, and a known
// activation_checkpointing mode. Throws naming the keys and values.
void check_common_model_keys(int64_t n_embd, int64_t n_head, const std::string& activation_checkpointing);

}  // namespace trident::models
