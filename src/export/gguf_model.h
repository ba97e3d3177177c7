// A model as a GGUF file llama.cpp runs: what llama.cpp's convert_hf_to_gguf.py writes for a
// Hugging Face directory of the same model, from the family's Hugging Face config and tensor
// names (models/registry.h), so the model families know nothing of GGUF.
//
// Architectures (the Hugging Face model_type):
//   gpt2           -> "gpt2": Conv1D weights transposed to (out, in), the head tied to
//                     token_embd (llama.cpp reuses it when output.weight is absent).
//   llama, mistral -> "llama": q_proj and k_proj rows permuted from Hugging Face's rotate-half
//                     RoPE layout to the interleaved pairs llama.cpp's RoPE rotates (the
//                     converter's permute()), with the key/value heads for k_proj.
// Others (qwen2's biases, Llama 3.1's RoPE scaling) are refused, naming what is missing.
//
// Weight types (--type), as the converter chooses them: 1-D tensors, norms, biases and the
// position embedding stay F32; every other weight is F32, F16, Q8_0 or Q4_0 (blocks of 32
// along the input dimension, quantized as ggml's reference quantizers do, bit for bit:
// kernels/cpu/ggml_blocks.h). A weight whose rows are not whole blocks falls back to F16, as the
// converter does, and the result says so.
//
// From a quantized directory (`trident quantize --scheme int8|int4`), the Q8_0 and Q4_0 layers
// are copied as they are: their codes and scales are GGUF's blocks already (Note [Codes and scales
// apart] in quantization/ggml_weight.h), so llama.cpp runs exactly trident's quantized weights. A
// head tied to the embedding and quantized as a copy (GPT-2's under int8) is written as
// output.weight beside the full-precision token_embd, as trident runs it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "core/status.h"
#include "core/tensor.h"
#include "data/tokenizer.h"
#include "export/gguf_file.h"
#include "models/model_config.h"
#include "quantization/ggml_weight.h"

namespace trident::exporting {

enum class GgufWeights { kF32, kF16, kQ8_0, kQ4_0 };
// "f32", "f16", "q8_0", "q4_0" (case-insensitive); errors name `where` and what is allowed.
StatusOr<GgufWeights> parse_gguf_weights(const std::string& value, const std::string& where);
const char* gguf_weights_name(GgufWeights w);

struct GgufExportResult {
  uint64_t bytes = 0;
  std::string architecture;
  std::vector<std::pair<std::string, GgmlType>> tensors;  // GGUF name and type, in file order
  std::vector<std::string> notes;                        // what differs from what was asked
};

// One parameter to write: trident's name and the parameter's logical shape, and, for a weight
// in ggml's blocks already (a quantized directory's Q8_0/Q4_0 layer), that weight, copied.
struct GgufParameter {
  checkpoint::TensorSpec spec;
  std::shared_ptr<const quantization::GgmlWeight> blocks;
};

// Writes `path` for the model `cfg` whose parameters are `params` (read(i) gives parameter i's
// values, called once each, in order, for those without blocks) with `tokenizer`'s vocabulary.
StatusOr<GgufExportResult> write_gguf_model(const std::string& path, const models::ModelConfig& cfg,
                                            const std::vector<GgufParameter>& params,
                                            const std::function<StatusOr<Tensor>(size_t)>& read, GgufWeights weights,
                                            const data::Tokenizer& tokenizer, const std::string& name);
// The same for parameters that are all values (a checkpoint's).
StatusOr<GgufExportResult> write_gguf_model(const std::string& path, const models::ModelConfig& cfg,
                                            const std::vector<checkpoint::TensorSpec>& specs,
                                            const std::function<StatusOr<Tensor>(size_t)>& read, GgufWeights weights,
                                            const data::Tokenizer& tokenizer, const std::string& name);

}  // namespace trident::exporting
