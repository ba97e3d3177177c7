#include "quantization/quantization_options.h"

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

}  // namespace trident::quantization
