// Quantized model directories: what `trident quantize` writes and `sample`, `eval` and `serve`
// read (through loading/model_source.h).
//
// Note [Quantized directories]
//   model.safetensors    every parameter of the model: a quantized linear layer's weight as the
//                        tensors its scheme stores, each named "<parameter>.<role>"
//                        ("h.0.attn.c_attn.weight.codes", ".scales"; QuantizedWeight::stored),
//                        every other parameter under its own name in its own dtype
//   config.toml          the training config the model came with (a checkpoint's, or the defaults
//                        with a Hugging Face directory's [model]): architecture, tokenizer, data
//   tokenizer files      a Hugging Face source's own (tokenizer.json, vocab.json, ...), copied
//   quantization.json    {"format": "trident-quantized", "version": 1, "scheme": "int8",
//                         "block_format": "Q8_0", "source": DIR, "skip": "",
//                         "tokenizer_in_dir": false, "parameters": {NAME: {"shape": [..],
//                         "dtype": "F32", "transposed": bool}, ...}}: which parameters are
//                        quantized, their shapes and dtypes as the model has them, and whether the
//                        quantized matrix is the parameter's transpose (GPT-2's Conv1D under a
//                        scheme whose blocks run along the input); a head tied to the embedding
//                        is "lm_head.weight" with "tied_to": "wte.weight" (its table, which stays
//                        in full precision under its own name: Note [What stays in full precision])
// Each file is written to a temporary name, synced and renamed (checkpoint/atomic_file.h), and
// quantization.json last, after a previous one is removed first: a directory holding it is
// complete. Loading builds the model from config.toml, then applies the stored weights as they
// are (no requantization): the scheme's layout() says which tensors a weight needs and what
// their dtypes and shapes are, and any disagreement (a missing tensor, a shape or dtype, an
// unknown scheme, a parameter the model lacks or the file lacks, a tensor left over, a truncated
// or corrupt file) is an error naming the file, the tensor and what is wrong.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "models/causal_lm.h"
#include "quantization/quantize_layers.h"
#include "quantization/scheme.h"
#include "train/train_config.h"

namespace trident::loading {

inline constexpr const char* kQuantizationFileName = "quantization.json";

// Whether `path` is a directory with a quantization.json.
bool is_quantized_dir(const std::string& path);

struct QuantizedDirWrite {
  std::string out;                    // the directory (created; an existing one's files replaced)
  std::string source;                 // where the model came from, recorded
  const train::TrainConfig* cfg = nullptr;  // written as config.toml
  const quantization::QuantScheme* scheme = nullptr;
  std::string skip;                   // the skip list used, recorded
  std::string tokenizer_dir;          // a Hugging Face source's directory: its tokenizer files are copied ("" none)
};
// Writes `model` (its quantized layers `layers`, the rest in full precision) as a quantized
// directory. Returns the bytes of model.safetensors.
StatusOr<uint64_t> write_quantized_dir(const QuantizedDirWrite& w, models::CausalLM& model,
                                       const std::vector<quantization::QuantizedParameter>& layers);

// What a quantized directory's quantization.json says.
struct QuantizedDirInfo {
  std::string scheme;
  std::string source;
  bool tokenizer_in_dir = false;
};
StatusOr<QuantizedDirInfo> read_quantized_dir_info(const std::string& dir);

// Loads `dir`'s weights into `model` (built from its config.toml): full-precision parameters
// copied in, quantized ones applied as views (quantization/quantize_layers.h) with their memory
// released. Returns the quantized parameters as applied (`trident export` copies GGUF's blocks
// from them). Errors: see Note [Quantized directories].
StatusOr<std::vector<quantization::QuantizedParameter>> load_quantized_dir(const std::string& dir,
                                                                          models::CausalLM& model);

}  // namespace trident::loading
