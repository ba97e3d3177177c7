// GPT-2's parameters and saved activations, stated without building the model (models/model_shapes.h).
#pragma once

#include "models/gpt2/config.h"
#include "models/model_shapes.h"

namespace trident::models::gpt2 {

ModelShapes model_shapes(const GPT2Config& cfg);

}  // namespace trident::models::gpt2
