// GPT-2 as a model family (models/registry.h): model.arch = "gpt2".
#pragma once

#include "models/registry.h"

namespace trident::models::gpt2 {

ModelFamily family();

}  // namespace trident::models::gpt2
