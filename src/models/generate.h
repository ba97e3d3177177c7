// Autoregressive sampling from any causal LM (models/causal_lm.h): temperature, top-k, seeded.
// Recomputes the (cropped) context for each new token; no KV cache yet.
#pragma once

#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "models/causal_lm.h"

namespace trident::models {

struct SampleOptions {
  int64_t max_new_tokens = 200;
  double temperature = 0.8;  // 0: greedy (argmax)
  int64_t top_k = 200;       // 0: no top-k filtering
  uint64_t seed = 1337;
};

// Continues `prompt` (token ids, at least one) and returns only the new tokens.
std::vector<int64_t> generate(const CausalLM& model, const std::vector<int64_t>& prompt, const SampleOptions& options);

}  // namespace trident::models
