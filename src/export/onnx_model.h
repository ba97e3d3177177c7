// A model as an ONNX decoder graph ONNX Runtime runs, laid out as Hugging Face optimum exports a
// causal LM "with past" (text-generation-with-past), from the family's Hugging Face config and
// tensor names (models/registry.h), so the model families know nothing of ONNX.
//
// Inputs:  input_ids (batch_size, sequence_length) int64;
//          attention_mask (batch_size, past_sequence_length + sequence_length) int64, 1 = attend;
//          position_ids (batch_size, sequence_length) int64, llama only (gpt2's positions are
//            past_sequence_length + 0, 1, ...);
//          past_key_values.N.key / .value (batch_size, kv_heads, past_sequence_length, head_dim)
//            float32, for every layer N (length 0 at the first step).
// Outputs: logits (batch_size, sequence_length, vocab_size) float32;
//          present.N.key / .value (batch_size, kv_heads, past_sequence_length + sequence_length,
//            head_dim) float32: the past with this call's keys and values appended.
//
// Opset 17, standard operators only: LayerNormalization; RMSNorm from ReduceMean/Sqrt;
// GELU's tanh form ("gelu_new") from Tanh/Mul/Add; RoPE from cos/sin tables trident computes
// as its kernel does (in double, Llama 3's scaling included) gathered by position_ids and
// rotated in Hugging Face's rotate-half layout; attention from MatMul/Softmax with a causal
// and padding mask built from the shapes, grouped kv heads broadcast without copies.
//
// Weights (--type): f32; f16 (matrices and embeddings stored as float16 and Cast to float32 in
// the graph, so the interface and the arithmetic stay float32); int8 (every linear layer's
// weight, the LM head included, stored int8 with a float32 scale per output channel,
// symmetric, and dequantized with DequantizeLinear: ONNX Runtime's QDQ form; embeddings, norms
// and biases stay float32). Weights over 1 GB go to ONNX external data beside the model
// (export/onnx_file.h): protobuf holds at most 2 GB.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "core/status.h"
#include "core/tensor.h"
#include "export/onnx_file.h"
#include "models/model_config.h"

namespace trident::exporting {

enum class OnnxWeights { kF32, kF16, kInt8 };
// "f32", "f16", "int8" (case-insensitive); errors name `where` and what is allowed.
StatusOr<OnnxWeights> parse_onnx_weights(const std::string& value, const std::string& where);
const char* onnx_weights_name(OnnxWeights w);

struct OnnxExportResult {
  uint64_t bytes = 0;           // the model file's
  uint64_t external_bytes = 0;  // its external data file's (file.external_data), 0 if none
  std::string architecture;  // the Hugging Face model_type
  OnnxFileSummary file;      // as read back
};

// Writes `path` for the model `cfg` whose parameters are `specs` (trident's names, logical
// shapes; read(i) gives parameter i, called once each, in order), then reads it back and checks
// it before returning. Tensor data over `inline_bytes` goes to external data (tests lower it).
StatusOr<OnnxExportResult> write_onnx_model(const std::string& path, const models::ModelConfig& cfg,
                                            const std::vector<checkpoint::TensorSpec>& specs,
                                            const std::function<StatusOr<Tensor>(size_t)>& read, OnnxWeights weights,
                                            uint64_t inline_bytes = kOnnxInlineBytes);

}  // namespace trident::exporting
