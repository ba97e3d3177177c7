#include "infer/engine.h"

#include <algorithm>

#include "autograd/grad_mode.h"
#include "core/check.h"
#include "core/copy.h"
#include "core/factory.h"

namespace trident::infer {

struct Engine::Running {
  size_t index;  // in the requests
  const GenerationRequest* request;
  TokenSampler sampler;
  std::vector<int64_t> seen;  // prompt and new tokens
  GenerationResult result;
  int64_t pending = -1;  // the drawn token not yet read by the model
};

Engine::Engine(const models::CausalLM& model, const EngineOptions& options) : model_(model), options_(options) {
  const models::ModelConfig& c = model.model_config();
  if (options_.capacity == 0) options_.capacity = c.block_size;
  TRI_CHECK(options_.max_batch >= 1, "generation: max_batch = ", options_.max_batch, " is invalid: allowed: >= 1");
  TRI_CHECK(options_.capacity >= 1 && options_.capacity <= c.block_size, "generation: a cache of ", options_.capacity,
            " tokens per sequence is invalid: allowed: 1 to the model's block_size ", c.block_size);
  // Keys and values in the dtype and on the device of the model's parameters.
  const auto params = model.named_parameters();
  TRI_CHECK(!params.empty(), "generation: the model has no parameters");
  const Tensor& any = params.front().second;
  const auto [kv_heads, head_size] = model.kv_cache_heads();
  cache_ = std::make_unique<KvCache>(KvCacheShape{c.n_layer, kv_heads, head_size, any.dtype(), any.device()},
                                     options_.max_batch, options_.capacity);
}

bool Engine::take(Running& r, int64_t token) const {
  const GenerationRequest& q = *r.request;
  if (std::find(q.stop_tokens.begin(), q.stop_tokens.end(), token) != q.stop_tokens.end()) {
    r.result.finish_reason = "stop";
    return true;
  }
  r.result.tokens.push_back(token);
  r.seen.push_back(token);
  r.pending = token;
  if (static_cast<int64_t>(r.result.tokens.size()) >= q.max_tokens) {
    r.result.finish_reason = "length";
    return true;
  }
  // Another token needs this one cached first: no room for it ends the request.
  if (static_cast<int64_t>(r.seen.size()) > options_.capacity) {
    r.result.finish_reason = "length";
    return true;
  }
  return false;
}

void Engine::prefill(Running& r, int64_t slot) {
  const std::vector<int64_t>& prompt = r.request->prompt;
  const auto n = static_cast<int64_t>(prompt.size());
  cache_->reset(slot);
  cache_->begin_step(slot, 1, n);
  const Tensor logits = model_.decode(core::to_device(from_vector(prompt, {1, n}), cache_->positions().device()), *cache_);
  cache_->end_step();
  const std::vector<float> row = to_vector<float>(logits);
  r.pending = -1;
  if (!take(r, r.sampler.next(row, r.seen))) return;
  r.pending = -1;  // ended: nothing more to read
}

std::vector<GenerationResult> Engine::generate(const std::vector<GenerationRequest>& requests) {
  autograd::NoGradGuard no_grad;
  for (size_t i = 0; i < requests.size(); ++i) {
    const GenerationRequest& q = requests[i];
    TRI_CHECK(!q.prompt.empty(), "generation: request ", i, " has an empty prompt");
    TRI_CHECK(static_cast<int64_t>(q.prompt.size()) <= options_.capacity, "generation: request ", i, "'s prompt of ",
              q.prompt.size(), " tokens is longer than the context of ", options_.capacity, " tokens");
    TRI_CHECK(q.max_tokens >= 1, "generation: request ", i, ": max_tokens = ", q.max_tokens, " is invalid: allowed: >= 1");
    const int64_t V = model_.model_config().vocab_size;
    for (int64_t t : q.prompt)
      TRI_CHECK(t >= 0 && t < V, "generation: request ", i, "'s prompt holds token ", t, ", not in the vocabulary of ", V);
    q.sampling.validate();
  }
  std::vector<GenerationResult> results(requests.size());
  std::vector<Running> batch;  // batch[i] is in cache slot i
  size_t next = 0;
  auto finish = [&](size_t i) {  // the request in slot i is done: the last one takes its slot
    results[batch[i].index] = std::move(batch[i].result);
    const size_t last = batch.size() - 1;
    if (i != last) {
      cache_->move(static_cast<int64_t>(last), static_cast<int64_t>(i));
      batch[i] = std::move(batch[last]);
    }
    cache_->reset(static_cast<int64_t>(last));
    batch.pop_back();
  };
  while (next < requests.size() || !batch.empty()) {
    // Admit waiting requests into free slots; one that ends on its first token leaves at once.
    while (next < requests.size() && static_cast<int64_t>(batch.size()) < options_.max_batch) {
      const GenerationRequest& q = requests[next];
      batch.push_back(Running{next, &q, TokenSampler(q.sampling), q.prompt, {}, -1});
      batch.back().result.prompt_tokens = static_cast<int64_t>(q.prompt.size());
      ++next;
      prefill(batch.back(), static_cast<int64_t>(batch.size()) - 1);
      if (batch.back().pending < 0) finish(batch.size() - 1);
    }
    if (batch.empty()) continue;
    // One token for every running request.
    const auto rows = static_cast<int64_t>(batch.size());
    std::vector<int64_t> ids;
    for (const Running& r : batch) ids.push_back(r.pending);
    cache_->begin_step(0, rows, 1);
    const Tensor logits = model_.decode(core::to_device(from_vector(ids, {rows, 1}), cache_->positions().device()), *cache_);
    cache_->end_step();
    const std::vector<float> all = to_vector<float>(logits);
    const size_t V = all.size() / static_cast<size_t>(rows);
    std::vector<bool> ended(batch.size(), false);
    for (size_t i = 0; i < batch.size(); ++i)
      ended[i] = take(batch[i], batch[i].sampler.next(std::span(all).subspan(i * V, V), batch[i].seen));
    for (size_t i = batch.size(); i-- > 0;)  // from the back, so a move never brings in an unvisited one
      if (ended[i]) finish(i);
  }
  return results;
}

}  // namespace trident::infer
