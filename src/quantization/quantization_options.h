// The [quantization] section: a frozen base stored in 4 bits (QLoRA's NF4), as bitsandbytes'
// BitsAndBytesConfig does it for Hugging Face (load_in_4bit with bnb_4bit_quant_type "nf4",
// bnb_4bit_use_double_quant, llm_int8_skip_modules).
#pragma once

#include <string>
#include <vector>

#include "core/options.h"

namespace trident::quantization {

struct QuantizationOptions {
  std::string base = "none";              // "none", or "nf4": frozen linear weights in 4-bit NormalFloat
  bool double_quant = true;               // the blocks' scales in 8 bits too (QLoRA's double quantization)
  std::string skip_modules = "lm_head";   // comma-separated layers left in full precision

  bool enabled() const { return base == "nf4"; }
  // skip_modules split at commas, blanks trimmed, empty items dropped.
  std::vector<std::string> skipped() const { return list_items(skip_modules); }
  // Which of the linear layers at `linear_paths` skip_modules names (nn::names_module), in order;
  // `module_paths`, every module of the model, for the message. Throws naming an item that names
  // no linear layer ("lm_head" excepted: a head tied to the embedding has no layer of its own).
  // quantize_base's rule, and the planner's (planner/fine_tuning.h).
  // `where` names the list in messages.
  std::vector<bool> skips(const std::vector<std::string>& linear_paths, const std::vector<std::string>& module_paths,
                          const std::string& where = "quantization.skip_modules") const;
  static const OptionTable<QuantizationOptions>& table();
};

}  // namespace trident::quantization
