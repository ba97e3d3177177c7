// Hugging Face model directories, in and out: config.json beside the weights as
// model.safetensors, or shards model-0000k-of-0000n.safetensors named by
// model.safetensors.index.json ({"metadata": {"total_size": bytes}, "weight_map": {tensor:
// file}}), tensors under the family's Hugging Face names in f32, bf16 or f16 (what
// transformers' save_pretrained writes and from_pretrained reads).
//
// train.init_from = DIR takes the architecture from DIR/config.json (resolve_init_from) and the
// weights from its files; `trident export --out DIR` writes one from a checkpoint
// (export/hf_writer.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "core/status.h"
#include "models/causal_lm.h"
#include "models/model_config.h"
#include "train/train_config.h"

namespace trident::train {

// A model directory's files: the config, the weights in one file, or the index of their shards.
inline constexpr const char* kHfConfigFile = "config.json";
inline constexpr const char* kHfSingleWeightsFile = "model.safetensors";
inline constexpr const char* kHfWeightIndexFile = "model.safetensors.index.json";

// Whether `path` is a directory holding a config.json and not a trident checkpoint (which has
// one too, beside its manifest and DONE marker: checkpoint/checkpoint_dir.h), complete or not.
bool is_hf_model_dir(const std::string& path);

// The [model] section of DIR/config.json (its model_type picks model.arch), keeping `run`'s
// settings that are the run's, not the architecture's: dropout, init_seed and
// activation_checkpointing. Errors name the file and the field, and any other key `run` was
// given (ModelConfig::given_keys) that config.json says otherwise, with both values.
StatusOr<models::ModelConfig> hf_model_config(const std::string& dir, const models::ModelConfig& run);

// When cfg.train.init_from is a Hugging Face directory, replaces cfg.model by its
// architecture (hf_model_config); otherwise leaves cfg alone.
Status resolve_init_from(TrainConfig& cfg);

// The safetensors files holding a model's weights: `path` itself when it is a file; in a
// directory, model.safetensors, or the shards model.safetensors.index.json names (each once,
// in order; the index must place exactly the tensors the shards hold). Errors name the
// directory or the index and what is missing.
StatusOr<std::vector<std::string>> hf_weight_files(const std::string& path);

}  // namespace trident::train
