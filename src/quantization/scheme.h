// The quantization schemes, by name: what `trident quantize --scheme` offers and what a
// quantized directory's quantization.json names (loading/quantized_dir.h). One table, so a
// scheme plugs in with one entry (Note [Adding a scheme]).
//
// Note [Adding a scheme]
// A scheme is a QuantizedWeight subclass (quantization/quantized_weight.h: dequantize a range,
// bytes, stored tensors, optionally its own fused product) and one QuantScheme entry in
// quant_schemes() (scheme.cc) giving its name, how it quantizes a weight, which tensors it stores
// for a shape, and how it is rebuilt from them. Nothing else changes: the view
// (quantized_view.h), the generic products (quantized_matmul.h), the choice of layers
// (quantize_layers.h), the files and their checks (loading/quantized_dir.h) and the commands
// read schemes only through this table.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "quantization/quantized_weight.h"

namespace trident::quantization {

struct QuantScheme {
  std::string name;         // "int8"
  std::string format;       // "Q8_0": GGUF's type name, or the scheme's own ("NF4")
  std::string description;  // one line, for --help
  // Blocks run along the input dimension of an (out, in) matrix: a layer whose weight is stored
  // (in, out) (GPT-2's Conv1D) is quantized as its transpose. Otherwise the weight is quantized
  // in its stored layout, flattened (NF4).
  bool blocks_along_input = true;
  // What `trident quantize --skip` is without one (Note [What stays in full precision]): "" for
  // int8 (the head in Q8_0, as llama.cpp's Q8_0 files), "lm_head" for the others.
  std::string default_skip = "lm_head";
  // Quantizes `w` (floating, on any device; read on the host), named `param` in messages.
  std::function<std::shared_ptr<const QuantizedWeight>(const Tensor& w, const std::string& param)> quantize;
  // The tensors a weight of `shape` stores (QuantizedWeight::stored's roles, dtypes, shapes).
  std::function<std::vector<StoredSpec>(const Shape& shape)> layout;
  // The weight of `shape` and `dtype` from tensors matching layout(shape), in its order.
  std::function<std::shared_ptr<const QuantizedWeight>(const Shape& shape, DType dtype, const std::vector<Tensor>& stored)>
      from_stored;
};

// Every scheme, in the order help lists them.
const std::vector<QuantScheme>& quant_schemes();
// The scheme named `name`, or nullptr.
const QuantScheme* find_quant_scheme(const std::string& name);
// "nf4, int8, int4": for messages.
std::string quant_scheme_names();

}  // namespace trident::quantization
