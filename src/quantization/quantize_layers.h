// Weight-only quantization of a model's linear layers for inference, in any scheme
// (quantization/scheme.h), applied from outside the model: each chosen layer (nn::Linear, GPT-2's
// Conv1D) gets a quantized view (quantization/quantized_view.h) and its full-precision weight's
// memory is released. `trident quantize` quantizes a loaded model this way and writes the result
// (loading/quantized_dir.h); loading a quantized directory applies the weights it stored, without
// requantizing (apply_quantized_layer).
//
// Note [What stays in full precision]
// Embeddings are not linear layers and are never quantized here: a row is read once per token,
// so its bytes matter little at decode. The LM head is: it is read whole at every decode step
// (GPT-2's tied head, the token embedding, is 38.6M of its 124M parameters: kept fp32 it was 154 of
// the 244 MB an int8 step reads, capping int8's decode speedup near 2x). As llama.cpp does, it is
// quantized by default where the blocks are Q8_0 (`int8`: llama.cpp's Q8_0 files store output.weight
// in Q8_0 too) and skipped by default under the 4-bit and W8A8 schemes (llama.cpp gives the head a
// higher-precision type than Q4_0's blocks; the head's errors land directly on the logits):
// QuantScheme::default_skip. A tied head is quantized as a copy for the head's product alone
// (QuantizedParameter::tied_to): the table stays fp32 for the lookups, so the embedding's values
// are the full-precision model's.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/causal_lm.h"
#include "quantization/quantized_weight.h"
#include "quantization/scheme.h"

namespace trident::quantization {

// One quantized linear layer's weight.
struct QuantizedParameter {
  std::string param;  // the weight's name ("h.0.attn.c_attn.weight")
  std::shared_ptr<const QuantizedWeight> weight;
  // The quantized matrix is the parameter's transpose: an (in, out) Conv1D weight under a scheme
  // whose blocks run along the input (QuantScheme::blocks_along_input).
  bool transposed = false;
  // A head tied to an embedding: `param` is "lm_head.weight", and this names the table it shares
  // (GPT-2's "wte.weight"), which stays in full precision for the lookups.
  std::string tied_to;
};

// The name a tied head's quantized copy goes by (Hugging Face's, and what --skip matches).
inline constexpr const char* kTiedHeadParam = "lm_head.weight";

// Quantizes every linear layer of `model` but those `skip` names (comma-separated items matched
// as quantization.skip_modules matches them: a glob over the whole path, or a path suffix; an
// item matching no layer is an error, "lm_head" excepted) and applies the views. A head tied to
// the embedding (CausalLM::tied_head_weight) is the layer "lm_head" here: unless skipped, its
// product reads a quantized copy of the table (Note [What stays in full precision]). Everything is checked and quantized before the first weight is released, so
// an error (naming the parameter) leaves the model whole. Returns the quantized layers in model
// order.
// `skip_where` names the list in messages ("--skip").
std::vector<QuantizedParameter> quantize_layers(models::CausalLM& model, const QuantScheme& scheme, const std::string& skip,
                                                const std::string& skip_where = "the skip list");

// Applies one stored quantized weight to the linear layer whose weight is `q.param`, releasing
// its memory, or with `q.tied_to` to the model's tied head (the table stays). Throws naming the
// parameter when it is not a linear layer's weight (or the model's tied table), when the shapes
// disagree, or when the layer is quantized already.
void apply_quantized_layer(models::CausalLM& model, const QuantizedParameter& q);

}  // namespace trident::quantization
