// Weight-only quantization of a model's linear layers for inference, in any scheme
// (quantization/scheme.h), applied from outside the model: each chosen layer (nn::Linear, GPT-2's
// Conv1D) gets a quantized view (quantization/quantized_view.h) and its full-precision weight's
// memory is released. `trident quantize` quantizes a loaded model this way and writes the result
// (loading/quantized_dir.h); loading a quantized directory applies the weights it stored, without
// requantizing (apply_quantized_layer).
//
// Note [What stays in full precision]
// Embeddings are not linear layers and are never quantized here; the LM head is skipped by
// default ("lm_head" in the skip list; GPT-2's head is the token embedding, tied). llama.cpp keeps
// the output and token-embedding tensors at higher precision than the blocks for the same reason:
// the head's errors land directly on the logits, and a vocabulary-sized embedding row is read
// once per token, so its bytes matter little at decode. The cost is that the tied GPT-2 head (38.6M
// of 124M parameters, read at every decode step) stays fp32, which bounds int8's decode speedup at
// ~2x for GPT-2 124M.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"
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
};

// Quantizes every linear layer of `model` but those `skip` names (comma-separated items matched
// as quantization.skip_modules matches them: a glob over the whole path, or a path suffix; an
// item matching no layer is an error, "lm_head" excepted, since a tied head has no layer) and
// applies the views. Everything is checked and quantized before the first weight is released, so
// an error (naming the parameter) leaves the model whole. Returns the quantized layers in model
// order.
// `skip_where` names the list in messages ("--skip").
std::vector<QuantizedParameter> quantize_layers(nn::Module& model, const QuantScheme& scheme, const std::string& skip,
                                                const std::string& skip_where = "the skip list");

// Applies one stored quantized weight to the linear layer whose weight is `q.param`, releasing
// its memory. Throws naming the parameter when it is not a linear layer's weight, when the shapes
// disagree, or when the layer is quantized already.
void apply_quantized_layer(nn::Module& model, const QuantizedParameter& q);

}  // namespace trident::quantization
