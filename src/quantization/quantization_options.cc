#include "quantization/quantization_options.h"

#include "core/check.h"
#include "nn/freeze.h"

namespace trident::quantization {

const OptionTable<QuantizationOptions>& QuantizationOptions::table() {
  static const auto t =
      OptionTable<QuantizationOptions>("quantization", "A frozen base in 4 bits (QLoRA; bitsandbytes' BitsAndBytesConfig)")
          .add("base", &QuantizationOptions::base,
               "\"nf4\": every frozen linear layer's weight is stored in 4-bit NormalFloat (blocks of 64) and "
               "dequantized inside its products (QLoRA); \"none\": full precision",
               {"none", "nf4"})
          .add("double_quant", &QuantizationOptions::double_quant,
               "store the blocks' scales in 8 bits too, one fp32 scale per 256 blocks (bnb_4bit_use_double_quant): "
               "0.516 instead of 0.5625 bytes per weight")
          .add("skip_modules", &QuantizationOptions::skip_modules,
               "linear layers kept in full precision, comma-separated: a name matches a layer whose path ends with it, "
               "'*' and '?' match over the whole path (llm_int8_skip_modules)");
  return t;
}

std::vector<bool> QuantizationOptions::skips(const std::vector<std::string>& linear_paths,
                                             const std::vector<std::string>& module_paths,
                                             const std::string& where) const {
  const std::vector<std::string> items = skipped();
  std::vector<bool> used(items.size(), false), skip(linear_paths.size(), false);
  for (size_t k = 0; k < linear_paths.size(); ++k)
    for (size_t i = 0; i < items.size(); ++i)
      if (nn::names_module(items[i], linear_paths[k])) skip[k] = used[i] = true;
  for (size_t i = 0; i < items.size(); ++i) {
    if (used[i] || items[i] == "lm_head") continue;
    const std::optional<std::string> near = closest_match(items[i], module_paths);
    TRI_CHECK(false, where, ": '", items[i], "' matches no layer of the model",
              near ? " (did you mean '" + *near + "'?)" : "", "; a name matches a layer whose path ends with it");
  }
  return skip;
}

}  // namespace trident::quantization
