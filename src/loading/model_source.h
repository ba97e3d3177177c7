// Where `sample`, `eval`, `export`, `serve` and `quantize` read a model from: a trident checkpoint
// (or a run directory: its latest), a Hugging Face model directory (config.json and safetensors
// weights, as from_pretrained reads; `export` writes them), with its adapters, or a quantized
// directory (`trident quantize` writes them: loading/quantized_dir.h); and the tokenizer that goes
// with it.
//
// Note [The loading layer]
// Loading a model needs the training config and the checkpoint readers of train/ (a checkpoint's
// config.toml, ZeRO-sharded weights, LoRA runs), so it cannot live in infer/, which sits below
// train/. It is its own layer, loading/, above train/ and planner/ and below serve/ and apps/:
// the commands share it, and train/ cannot see it (tests/layering_test.py).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/tokenizer.h"
#include "models/causal_lm.h"
#include "train/train_config.h"

namespace trident::loading {

// One checkpoint directory: its DONE marker, or (an interrupted write) its manifest alone.
bool is_checkpoint_dir(const std::string& path);
// A run directory (train.out_dir: its latest checkpoint) or one checkpoint directory. A
// checkpoint without DONE is returned as it is: CheckpointReader::open refuses it as incomplete.
StatusOr<std::string> resolve_checkpoint(const std::string& path);
// The training config saved in a checkpoint.
StatusOr<train::TrainConfig> checkpoint_config(const std::string& dir);

struct ModelSource {
  std::string dir;
  bool hf = false;
  bool quantized = false;         // a quantized directory (loading/quantized_dir.h)
  bool tokenizer_in_dir = false;  // a quantized directory that carries its tokenizer's files
  train::TrainConfig cfg;  // a checkpoint's saved config; for a model directory, the defaults with its [model]
};
StatusOr<ModelSource> resolve_model_source(const std::string& path);

// A model with a checkpoint's weights (of any layout: whole, or sharded by ZeRO), a model
// directory's, or a quantized directory's (its quantized layers as views, their full weights
// never allocated past the build); a LoRA run's checkpoint with its adapters (its config's
// [lora]), and `adapter` (a PEFT directory, "" for none) applied on top. In eval mode.
// `quantized`, when given, receives the names of the quantized parameters (whose memory is
// released: they cannot be read).
StatusOr<std::unique_ptr<models::CausalLM>> load_model(const ModelSource& src, const std::string& adapter,
                                                       std::vector<std::string>* quantized = nullptr);

// The tokenizer of `src`: `tokenizer` (a name or files; "" for the checkpoint config's
// data.tokenizer, or a model directory's own files) with `vocab_dir`. Errors say how to name
// another; a tokenizer with more ids than the model has is refused.
StatusOr<std::unique_ptr<data::Tokenizer>> load_tokenizer(const ModelSource& src, const std::string& tokenizer,
                                                          const std::string& vocab_dir);

}  // namespace trident::loading
