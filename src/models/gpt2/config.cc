#include "models/gpt2/config.h"

#include "core/check.h"

namespace trident::models::gpt2 {

void GPT2Config::validate() const {
  TRI_CHECK(n_embd % n_head == 0, "model: n_embd (", n_embd, ") must be divisible by n_head (",
            n_head, ")");
  TRI_CHECK(activation_checkpointing == "none" || activation_checkpointing == "selective" ||
                activation_checkpointing == "full",
            "model: activation_checkpointing is \"", activation_checkpointing,
            "\"; allowed: \"none\", \"selective\", \"full\"");
}

const OptionTable<GPT2Config>& GPT2Config::table() {
  static const auto t =
      OptionTable<GPT2Config>("model", "GPT-2 architecture (Hugging Face GPT2LMHeadModel)")
          .add("n_layer", &GPT2Config::n_layer, "number of transformer blocks", Range::at_least(1))
          .add("n_head", &GPT2Config::n_head, "attention heads per block", Range::at_least(1))
          .add("n_embd", &GPT2Config::n_embd, "model width; divisible by n_head", Range::at_least(1))
          .add("block_size", &GPT2Config::block_size, "context length (learned positions)", Range::at_least(1))
          .add("vocab_size", &GPT2Config::vocab_size, "vocabulary size (50257 for GPT-2's BPE)", Range::at_least(1))
          .add("dropout", &GPT2Config::dropout, "dropout probability while training", Range::between(0.0, 0.999))
          .add("layer_norm_eps", &GPT2Config::layer_norm_eps, "LayerNorm epsilon", Range::positive())
          .add("init_std", &GPT2Config::init_std, "std of the normal init", Range::positive())
          .add("init_seed", &GPT2Config::init_seed, "seed of the initial weights", Range::non_negative())
          .add("activation_checkpointing", &GPT2Config::activation_checkpointing,
               "per block: keep every activation (none), recompute all but the matmul outputs (selective), "
               "keep only the block input (full)",
               {"none", "selective", "full"});
  return t;
}

}  // namespace trident::models::gpt2
