// Generation with a KV cache for any causal LM (models/causal_lm.h's decode()): each request's
// prompt is read once (prefill) into a cache slot, then every running request takes one token
// per step, all of them in one batched decode; a request that ends (a stop token, its
// max_tokens, or the model's context) leaves the batch at once and a waiting one takes its slot
// (continuous batching, as vLLM schedules). A request's tokens do not depend on the others
// in the batch: greedy decoding gives what the request gives alone, and a sampled one draws
// from its own seed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "infer/kv_cache.h"
#include "infer/sampling.h"
#include "models/causal_lm.h"

namespace trident::infer {

struct GenerationRequest {
  std::vector<int64_t> prompt;        // at least one token
  int64_t max_tokens = 64;            // new tokens at most
  SamplingParams sampling;
  std::vector<int64_t> stop_tokens;   // end the request (not part of its tokens)
};

struct GenerationResult {
  std::vector<int64_t> tokens;  // the new tokens
  // "stop" (a stop token) or "length" (max_tokens, or the context is full: the cache's
  // capacity, at most the model's block_size), as OpenAI's API and vLLM report them.
  std::string finish_reason;
  int64_t prompt_tokens = 0;
};

struct EngineOptions {
  int64_t max_batch = 8;  // requests decoded together (cache slots)
  int64_t capacity = 0;   // tokens per slot, prompt included; 0: the model's block_size
};

class Engine {
 public:
  // The model must be on one device, whole (no parallelism), in eval mode while generating.
  Engine(const models::CausalLM& model, const EngineOptions& options);

  // Runs every request to its end, max_batch at a time; results in request order.
  std::vector<GenerationResult> generate(const std::vector<GenerationRequest>& requests);

  const KvCache& cache() const { return *cache_; }

 private:
  struct Running;
  // Reads request `r`'s prompt into slot `slot` and draws its first token.
  void prefill(Running& r, int64_t slot);
  // Appends `token` to the request; true when it has ended.
  bool take(Running& r, int64_t token) const;

  const models::CausalLM& model_;
  EngineOptions options_;
  std::unique_ptr<KvCache> cache_;
};

}  // namespace trident::infer
