#include "adapters/lora_options.h"

#include <cmath>

#include "core/check.h"

namespace trident::adapters {

double LoraOptions::scaling() const {
  return use_rslora ? alpha / std::sqrt(static_cast<double>(r)) : alpha / static_cast<double>(r);
}

std::vector<std::string> LoraOptions::targets() const { return list_items(target_modules); }

void LoraOptions::validate() const {
  TRI_CHECK(dropout < 1.0, "lora.dropout = ", dropout, " is invalid: it must be in [0, 1) (1 would drop every input)");
  if (!enabled()) return;
  TRI_CHECK(!targets().empty(), "lora.r = ", r,
            " asks for adapters but lora.target_modules is empty: name the layers, e.g. \"q_proj,k_proj,v_proj,o_proj\" "
            "(Llama), \"c_attn,c_proj\" (GPT-2), or \"all-linear\"");
}

const OptionTable<LoraOptions>& LoraOptions::table() {
  static const auto t =
      OptionTable<LoraOptions>("lora", "Low-rank adapters on a frozen base (PEFT's LoraConfig)")
          .add("r", &LoraOptions::r, "the adapters' rank (0: no LoRA; every other parameter trains)",
               Range::between(0, 65536))
          .add("alpha", &LoraOptions::alpha, "lora_alpha: the update B A x is scaled by alpha / r",
               Range::positive())
          .add("dropout", &LoraOptions::dropout, "lora_dropout: dropout on the adapter's input",
               Range::between(0.0, 1.0))
          .add("target_modules", &LoraOptions::target_modules,
               "the linear layers that get adapters, comma-separated: a name matches a layer whose path ends "
               "with it (\"q_proj,v_proj\", \"c_attn\"), '*' and '?' match over the whole path "
               "(\"layers.0.*\"), \"all-linear\" is every linear layer but the LM head")
          .add("use_rslora", &LoraOptions::use_rslora, "scale by alpha / sqrt(r) instead of alpha / r (rsLoRA)")
          .add("init_seed", &LoraOptions::init_seed, "seed of A's initialization (B starts at zero)",
               Range::non_negative());
  return t;
}

}  // namespace trident::adapters
