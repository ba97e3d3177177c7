// Running a family's transformer blocks [begin, end) the way every family does: each block a
// part of the model (ZeRO-3's gather unit i + 1, nn/part_hooks.h) and, while training, under
// model.activation_checkpointing ("selective": keep the matmul outputs and recompute the rest;
// "full": keep only the block's input), with the dropout generator rewound for the rerun so
// the numbers are those of "none" (Note [Activation checkpointing] in models/gpt2/model.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/rng.h"
#include "core/tensor.h"
#include "nn/part_hooks.h"

namespace trident::models {

// block(i, x): block i's forward. `training`: the model is in training mode (evaluation never
// checkpoints). `dropout`: the generator the blocks draw from (nullptr: none).
Tensor run_block_stack(const std::function<Tensor(int64_t i, const Tensor& x)>& block, int64_t begin, int64_t end,
                       const Tensor& x, const std::string& checkpointing, bool training, Generator* dropout,
                       nn::PartHooks* hooks);

}  // namespace trident::models
