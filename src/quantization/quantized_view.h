// The weight view of a quantized linear layer: a wrapper of the weight-view kind (nn/wrapper.h,
// innermost) that computes the layer's product from a QuantizedWeight of any scheme
// (quantization/quantized_linear.h), then the bias and the activation the call asks for. The
// model, its adapters and the parallel styles above the view see a plain layer.
//
// Note [The quantized view]
// Innermost on its layer (Note [Wrapper order]): it replaces the layer's own product, so it
// never calls inward. It checks that it is handed the weight it replaced: a wrapper above that
// passed another (a narrowed copy, a dequantized view) would otherwise be ignored silently.
#pragma once

#include <memory>
#include <string>

#include "nn/embedding.h"
#include "nn/linear.h"
#include "quantization/quantized_weight.h"

namespace trident::quantization {

// Adds the view to `layer`, whose parameter `weight` (named `param`, for messages) it replaces:
// `q` is the weight as an (out, in) matrix, or (in, out) with `in_out` (GPT-2's Conv1D quantized
// in its own layout, as QLoRA's NF4 base is; a scheme with blocks along the input quantizes a
// Conv1D weight's transpose, without in_out). Refuses a layer that has a quantized view already.
// The caller releases the weight's memory.
void add_quantized_view(nn::LinearLayer& layer, std::shared_ptr<const QuantizedWeight> q, Tensor weight, bool in_out,
                        const std::string& param);

// The same for a head tied to `table` (GPT-2's LM head is its token embedding): the head's
// product (attend(), and the loss through it) reads `q`, an (num, dim) matrix; lookups still read
// the table, which stays (Note [What stays in full precision]). `param` names the head in
// messages ("lm_head.weight"). Refuses a table whose head is quantized already.
void add_quantized_head(nn::Embedding& table, std::shared_ptr<const QuantizedWeight> q, const std::string& param);

}  // namespace trident::quantization
