// A model as a Hugging Face model directory: config.json and the weights under the family's
// Hugging Face names, in one model.safetensors or in shards named by
// model.safetensors.index.json (what transformers' save_pretrained writes and from_pretrained
// reads; train/hf_model_dir.h reads them back for train.init_from).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "core/status.h"
#include "core/tensor.h"
#include "models/model_config.h"

namespace trident::exporting {

// Writes `dir` (created if missing): config.json for `cfg`, and the tensors `specs` (trident's
// names; read(i) gives tensor i when it is written) under the family's Hugging Face names, in
// shards of at most `max_shard_bytes` (one model.safetensors when they all fit, else
// model-0000k-of-0000n.safetensors and the index). Each file is written to a temporary name,
// synced and renamed. Returns the files written.
StatusOr<std::vector<std::string>> write_hf_model_dir(const std::string& dir, const models::ModelConfig& cfg,
                                                      const std::vector<checkpoint::TensorSpec>& specs,
                                                      const std::function<StatusOr<Tensor>(size_t)>& read,
                                                      int64_t max_shard_bytes);

}  // namespace trident::exporting
