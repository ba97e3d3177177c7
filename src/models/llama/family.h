// The LLaMA family (models/registry.h): model.arch = "llama".
#pragma once

#include "models/registry.h"

namespace trident::models::llama {

ModelFamily family();

}  // namespace trident::models::llama
