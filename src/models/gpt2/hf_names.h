// Moving GPT-2 weights to and from Hugging Face's names.
//
// trident's parameter names are Hugging Face's GPT2Model names ("wte.weight",
// "h.0.attn.c_attn.weight", ...) with the same Conv1D [in, out] layouts, so a checkpoint's
// model.safetensors loads in transformers' GPT2LMHeadModel and HF files load here. On load:
//   - a "transformer." prefix (GPT2LMHeadModel's state dict) is accepted;
//   - "lm_head.weight" is accepted and ignored: the head is tied to wte;
//   - "h.N.attn.bias" / "h.N.attn.masked_bias" (causal-mask buffers in older files) are ignored;
//   - any other unknown tensor, a missing parameter, or a shape mismatch is an error naming it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "models/gpt2/config.h"

namespace trident::models::gpt2 {

// The trident parameter name a tensor in an HF file stands for; nullopt for tensors that are
// deliberately ignored (tied head, mask buffers). Unknown names are returned unchanged, so
// the caller reports them as unknown parameters.
std::optional<std::string> parameter_name_from_hf(std::string_view hf_name);

// The keys of Hugging Face's config.json describing this model, as JSON text.
std::string hf_config_json(const GPT2Config& cfg);

}  // namespace trident::models::gpt2
