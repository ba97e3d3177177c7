// LLaMA's parameters and saved activations, stated without building the model (models/model_shapes.h).
#pragma once

#include "models/llama/config.h"
#include "models/model_shapes.h"

namespace trident::models::llama {

ModelShapes model_shapes(const LlamaConfig& cfg);

}  // namespace trident::models::llama
