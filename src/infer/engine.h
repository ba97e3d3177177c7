// Generation with a KV cache for any causal LM (models/causal_lm.h's decode()): each request's
// prompt is read once (prefill) into a cache slot, then every running request takes one token
// per step, all of them in one batched decode; a request that ends (a stop token, its
// max_tokens, or the context) leaves the batch at once and a waiting one takes its slot
// (continuous batching, as vLLM schedules) when the cache's pool has the blocks it may need
// (Note [Reserved blocks] in infer/kv_cache.h; requests are admitted in order). A request's tokens do not depend on the others in
// the batch: greedy decoding gives what the request gives alone, and a sampled one draws from
// its own seed.
//
// Note [Batched prefill]
// Prompts admitted in the same step are read in runs of consecutive slots with the same length,
// each run one (rows, n) decode: its products have rows x n rows instead of n, which a
// compute-bound prefill turns into fewer passes over each weight panel. A run's rows are the
// same arithmetic as one prompt's (every kernel sums a row's outputs in an order that does not
// depend on the other rows), so a prompt's tokens do not change with its neighbours; tests check
// both equal and mixed lengths against each prompt alone.
//
// Two ways to drive it: generate() runs a list of requests to their ends; a server submits
// requests as they come, calls step() in its loop and streams each step's events, and cancels
// the requests whose clients have gone. Not thread-safe: one thread drives an engine.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
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

// What one step did for one request: a new token, and/or its end.
struct StepEvent {
  int64_t id;
  std::optional<int64_t> token;
  std::optional<std::string> finish_reason;  // set on the request's last event
};

struct EngineOptions {
  int64_t max_batch = 8;     // requests decoded together (cache slots)
  int64_t capacity = 0;      // tokens per slot, prompt included; 0: the model's block_size
  int64_t cache_tokens = 0;  // the KV cache's pool, shared by the slots; 0: every slot's longest at once
  // Prompt tokens a step reads at most before its decode (one prompt at least; 0: no bound), so
  // that a burst of arrivals does not stall the running requests for all of their prompts at
  // once (vLLM's max_num_batched_tokens); the rest are admitted in the next steps.
  int64_t prefill_tokens_per_step = 2048;
  // Threads of the decode steps (0: the process's, as prefill): Note [Decode threads].
  int64_t decode_threads = 0;
};

// Note [Decode threads]
// A decode step of a few rows is many small operations, each ending at a barrier where the
// threads wait for each other; a prefill is few large ones. Where a barrier is dear (a VM's
// vCPUs), one thread can decode faster than two: LLaMA 125M int4 at batch 1 on 2 Zen 5 vCPUs,
// decode_bench in turns, 223 and 241 tok/s on one thread against 201 and 189 on two, while
// its prefill took 45 ms on one and 35-39 on two. llama.cpp has the same pair of settings
// (-t for generation, -tb for prompts). The bits do not change: every op's results are
// independent of the thread count (Note [Deterministic parallelism] in core/parallel.h).
// How dear a barrier is depends on how threads wait. Those numbers were taken with
// OMP_WAIT_POLICY=PASSIVE (idle threads sleep at once; the test suite's setting). Under OpenMP's
// default (they spin a while first), what `trident sample` and `serve` run with, two threads won:
// LLaMA 125M f32 at batch 1 on 2 Zen 4 vCPUs, decode_bench in turns, 99-107 tok/s on two threads
// against 64-66 on one (PASSIVE: 63-65 on two; ACTIVE, always spinning: 76-77).

class Engine {
 public:
  // The model must be on one device, whole (no parallelism), in eval mode while generating.
  Engine(const models::CausalLM& model, const EngineOptions& options);
  ~Engine();

  // Queues a request; returns its id. Throws, naming the field, for a request it cannot run.
  int64_t submit(const GenerationRequest& request);
  // submit()'s checks alone. Reads only what is fixed when the engine is made (the model's
  // shape, the cache's size), so another thread may call it while one drives the engine.
  void check(const GenerationRequest& request) const;
  // Admits queued requests into free slots (each prompt read, its first token drawn), then
  // gives every running request one more token. Returns what happened, request by request.
  std::vector<StepEvent> step();
  // Drops a queued or running request (its client is gone): its slot is free at once.
  void cancel(int64_t id);
  // Whether nothing is queued or running.
  bool idle() const;
  int64_t running() const;
  int64_t queued() const;

  // Runs every request to its end; results in request order.
  std::vector<GenerationResult> generate(const std::vector<GenerationRequest>& requests);

  const KvCache& cache() const { return *cache_; }
  const EngineOptions& options() const { return options_; }

 private:
  struct Running;
  // The positions a request may fill in the cache: its prompt and all but its last new token.
  int64_t positions_of(const GenerationRequest& request) const;
  // Reads the prompts of slots [first, first + rows), all of one length, into the cache in one
  // batched step and draws each one's first token.
  void prefill(int64_t first, int64_t rows, std::vector<StepEvent>& events);
  // Appends `token` to the request and records the event; true when it has ended.
  bool take(Running& r, int64_t token, std::vector<StepEvent>& events) const;
  // The request in slot i has ended: the last slot's request takes its place.
  void release(size_t i);

  const models::CausalLM& model_;
  EngineOptions options_;
  std::unique_ptr<KvCache> cache_;
  std::deque<std::unique_ptr<Running>> queue_;
  std::vector<std::unique_ptr<Running>> batch_;  // batch_[i] is in cache slot i
  int64_t next_id_ = 0;
};

}  // namespace trident::infer
