// Requests for the generation tests: random prompts and greedy requests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "infer/engine.h"

namespace trident::infer::testing {

// n tokens drawn from [0, vocab) by `seed`.
inline std::vector<int64_t> prompt_of(int64_t n, uint64_t seed, int64_t vocab = 40) {
  std::mt19937_64 gen(seed);
  std::vector<int64_t> p;
  for (int64_t i = 0; i < n; ++i) p.push_back(static_cast<int64_t>(gen() % static_cast<uint64_t>(vocab)));
  return p;
}

inline GenerationRequest greedy(std::vector<int64_t> prompt, int64_t max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  return r;
}

}  // namespace trident::infer::testing
