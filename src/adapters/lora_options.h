// The [lora] section: low-rank adapters on a frozen base (PEFT's LoraConfig, by its names where
// it has one). lora.r = 0 (the default) trains no adapter.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/options.h"

namespace trident::adapters {

struct LoraOptions {
  int64_t r = 0;                  // the adapters' rank (0: no LoRA)
  double alpha = 16.0;            // lora_alpha: the update is scaled by alpha / r (rsLoRA: alpha / sqrt(r))
  double dropout = 0.0;           // lora_dropout, on the adapter's input only
  std::string target_modules;     // comma-separated (Note [LoRA targets] in adapters/lora.h)
  bool use_rslora = false;        // scale by alpha / sqrt(r) (Kalajdzievski 2023)
  int64_t init_seed = 0;          // draws A (B starts at zero)

  bool enabled() const { return r > 0; }
  // alpha / r, or alpha / sqrt(r) with use_rslora.
  double scaling() const;
  // target_modules split at commas, blanks trimmed, empty items dropped.
  std::vector<std::string> targets() const;
  // Throws naming the key when r > 0 and the section cannot be applied (no targets).
  void validate() const;
  static const OptionTable<LoraOptions>& table();
};

}  // namespace trident::adapters
