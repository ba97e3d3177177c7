#include "quantization/scheme.h"

#include "quantization/ggml_weight.h"
#include "quantization/nf4.h"
#include "quantization/w8a8_weight.h"

namespace trident::quantization {
namespace {

using kernels::cpu::GgmlBlockType;

QuantScheme ggml_scheme(GgmlBlockType type, std::string name, std::string description, std::string default_skip) {
  QuantScheme s;
  s.name = std::move(name);
  s.format = kernels::cpu::ggml_block_type_name(type);
  s.description = std::move(description);
  s.default_skip = std::move(default_skip);
  s.blocks_along_input = true;
  s.quantize = [type](const Tensor& w, const std::string& param) {
    return std::make_shared<const GgmlWeight>(GgmlWeight::quantize(type, w, param));
  };
  s.layout = [type](const Shape& shape) { return GgmlWeight::layout(type, shape); };
  s.from_stored = [type](const Shape&, DType dtype, const std::vector<Tensor>& stored) {
    return std::make_shared<const GgmlWeight>(GgmlWeight::from_stored(type, dtype, stored));
  };
  return s;
}

QuantScheme nf4_scheme() {
  QuantScheme s;
  s.name = "nf4";
  s.format = "NF4";
  s.description = "4-bit NormalFloat in blocks of 64 with 8-bit block scales (QLoRA's base): 0.516 bytes per weight";
  s.blocks_along_input = false;
  s.quantize = [](const Tensor& w, const std::string& param) {
    return std::make_shared<const Nf4Weight>(Nf4Weight::quantize(w, /*double_quant=*/true, param));
  };
  s.layout = [](const Shape& shape) { return Nf4Weight::layout(shape.product(), /*double_quant=*/true); };
  s.from_stored = [](const Shape& shape, DType dtype, const std::vector<Tensor>& stored) {
    return std::make_shared<const Nf4Weight>(Nf4Weight::from_stored(shape, dtype, /*double_quant=*/true, stored));
  };
  return s;
}

QuantScheme w8a8_scheme() {
  QuantScheme s;
  s.name = "w8a8";
  s.format = "W8A8";
  s.description =
      "int8 weights per output channel x int8 activations per token (ONNX Runtime's dynamic quantization), "
      "summed by the CPU's int8 dot products: 1 byte per weight";
  s.blocks_along_input = true;
  s.quantize = [](const Tensor& w, const std::string& param) {
    return std::make_shared<const W8a8Weight>(W8a8Weight::quantize(w, param));
  };
  s.layout = [](const Shape& shape) { return W8a8Weight::layout(shape); };
  s.from_stored = [](const Shape& shape, DType dtype, const std::vector<Tensor>& stored) {
    return std::make_shared<const W8a8Weight>(W8a8Weight::from_stored(shape, dtype, stored));
  };
  return s;
}

}  // namespace

const std::vector<QuantScheme>& quant_schemes() {
  static const std::vector<QuantScheme> schemes{
      ggml_scheme(GgmlBlockType::kQ8_0, "int8",
                  "int8 weight-only, GGUF's Q8_0: blocks of 32 along the input, an fp16 scale each (1.0625 bytes per weight); "
                  "the LM head too, unless --skip says otherwise",
                  ""),
      ggml_scheme(GgmlBlockType::kQ4_0, "int4",
                  "int4 weight-only, GGUF's Q4_0: blocks of 32 along the input, an fp16 scale each (0.5625 bytes per weight)",
                  "lm_head"),
      nf4_scheme(),
      w8a8_scheme(),
  };
  return schemes;
}

const QuantScheme* find_quant_scheme(const std::string& name) {
  for (const QuantScheme& s : quant_schemes())
    if (s.name == name) return &s;
  return nullptr;
}

std::string quant_scheme_names() {
  std::string out;
  for (const QuantScheme& s : quant_schemes()) out += (out.empty() ? "" : ", ") + s.name;
  return out;
}

}  // namespace trident::quantization
