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

// Writes `path` for the model `cfg` whose parameters are `specs` (trident's names, logical
// shapes; read(i) gives parameter i, called once each, in order) with `tokenizer`'s vocabulary.
StatusOr<GgufExportResult> write_gguf_model(const std::string& path, const models::ModelConfig& cfg,
                                            const std::vector<checkpoint::TensorSpec>& specs,
                                            const std::function<StatusOr<Tensor>(size_t)>& read, GgufWeights weights,
                                            const data::Tokenizer& tokenizer, const std::string& name);

}  // namespace trident::exporting
