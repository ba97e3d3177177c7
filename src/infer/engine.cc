#include "infer/engine.h"

#include <algorithm>
#include <map>
#include <span>

#include "autograd/grad_mode.h"
#include "core/check.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/parallel.h"

namespace trident::infer {

struct Engine::Running {
  int64_t id;
  GenerationRequest request;
  TokenSampler sampler;
  std::vector<int64_t> seen;  // prompt and new tokens
  GenerationResult result;
  int64_t pending = -1;  // the drawn token the model has not read yet
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
  TRI_CHECK(options_.decode_threads >= 0, "generation: decode_threads = ", options_.decode_threads,
            " is invalid: allowed: >= 0 (0: the process's threads)");
  TRI_CHECK(options_.prefill_tokens_per_step >= 0, "generation: prefill_tokens_per_step = ",
            options_.prefill_tokens_per_step, " is invalid: allowed: >= 0 (0: no bound)");
  TRI_CHECK(options_.cache_tokens >= 0, "generation: a KV cache of ", options_.cache_tokens,
            " tokens is invalid: allowed: >= 0 (0: every slot's longest sequence at once)");
  cache_ = std::make_unique<KvCache>(KvCacheShape{c.n_layer, kv_heads, head_size, any.dtype(), any.device()},
                                     options_.max_batch, options_.capacity, options_.cache_tokens,
                                     model.attention_window());
}

int64_t Engine::positions_of(const GenerationRequest& q) const {
  // The last new token is never read back, so it needs no room in the cache.
  return std::min<int64_t>(options_.capacity, static_cast<int64_t>(q.prompt.size()) + q.max_tokens - 1);
}

Engine::~Engine() = default;

void Engine::check(const GenerationRequest& q) const {
  TRI_CHECK(!q.prompt.empty(), "generation: the prompt is empty");
  TRI_CHECK(static_cast<int64_t>(q.prompt.size()) <= options_.capacity, "generation: the prompt of ", q.prompt.size(),
            " tokens is longer than the context of ", options_.capacity, " tokens");
  TRI_CHECK(q.max_tokens >= 1, "generation: max_tokens = ", q.max_tokens, " is invalid: allowed: >= 1");
  const int64_t V = model_.model_config().vocab_size;
  for (int64_t t : q.prompt)
    TRI_CHECK(t >= 0 && t < V, "generation: the prompt holds token ", t, ", not in the vocabulary of ", V);
  for (int64_t t : q.stop_tokens)
    TRI_CHECK(t >= 0 && t < V, "generation: stop token ", t, " is not in the vocabulary of ", V);
  q.sampling.validate();
  const int64_t prompt = static_cast<int64_t>(q.prompt.size()), need = cache_->blocks_for(positions_of(q), prompt);
  TRI_CHECK(need <= cache_->blocks(), "generation: a prompt of ", prompt, " tokens with max_tokens = ", q.max_tokens,
            " needs ", need * KvCache::kBlockTokens, " tokens of KV cache, but it holds ",
            cache_->blocks() * KvCache::kBlockTokens, ": lower max_tokens or give the cache more tokens");
}

int64_t Engine::submit(const GenerationRequest& request) {
  check(request);
  auto r = std::make_unique<Running>(Running{next_id_++, request, TokenSampler(request.sampling), request.prompt, {}, -1});
  r->result.prompt_tokens = static_cast<int64_t>(request.prompt.size());
  queue_.push_back(std::move(r));
  return queue_.back()->id;
}

bool Engine::take(Running& r, int64_t token, std::vector<StepEvent>& events) const {
  const GenerationRequest& q = r.request;
  if (std::find(q.stop_tokens.begin(), q.stop_tokens.end(), token) != q.stop_tokens.end()) {
    r.result.finish_reason = "stop";
    events.push_back({r.id, std::nullopt, "stop"});
    return true;
  }
  r.result.tokens.push_back(token);
  r.seen.push_back(token);
  r.pending = token;
  // The next token needs this one cached first: no room for it ends the request.
  if (static_cast<int64_t>(r.result.tokens.size()) >= q.max_tokens ||
      static_cast<int64_t>(r.seen.size()) > options_.capacity)
    r.result.finish_reason = "length";
  events.push_back({r.id, token, r.result.finish_reason.empty() ? std::nullopt : std::optional(r.result.finish_reason)});
  return !r.result.finish_reason.empty();
}

void Engine::prefill(int64_t first, int64_t rows, std::vector<StepEvent>& events) {
  const auto n = static_cast<int64_t>(batch_[static_cast<size_t>(first)]->request.prompt.size());
  std::vector<int64_t> ids;
  ids.reserve(static_cast<size_t>(rows * n));
  for (int64_t i = first; i < first + rows; ++i) {
    const std::vector<int64_t>& prompt = batch_[static_cast<size_t>(i)]->request.prompt;
    ids.insert(ids.end(), prompt.begin(), prompt.end());
  }
  cache_->begin_step(first, rows, n);
  const Tensor logits = model_.decode(core::to_device(from_vector(ids, {rows, n}), cache_->positions().device()), *cache_);
  cache_->end_step();
  const std::vector<float> all = to_vector<float>(logits);
  const size_t V = all.size() / static_cast<size_t>(rows);
  for (int64_t i = 0; i < rows; ++i) {
    Running& r = *batch_[static_cast<size_t>(first + i)];
    take(r, r.sampler.next(std::span(all).subspan(static_cast<size_t>(i) * V, V), r.seen), events);
  }
}

void Engine::release(size_t i) {
  const size_t last = batch_.size() - 1;
  cache_->reset(static_cast<int64_t>(i));
  if (i != last) {
    cache_->move(static_cast<int64_t>(last), static_cast<int64_t>(i));
    batch_[i] = std::move(batch_[last]);
  }
  batch_.pop_back();
}

std::vector<StepEvent> Engine::step() {
  autograd::NoGradGuard no_grad;
  std::vector<StepEvent> events;
  // Admit queued requests into free slots, then read their prompts: consecutive ones of the same
  // length in one batched prefill (Note [Batched prefill]). One that ends on its first token
  // leaves at once.
  const size_t admitted_from = batch_.size();
  int64_t prefilled = 0;
  while (!queue_.empty() && static_cast<int64_t>(batch_.size()) < options_.max_batch) {
    const GenerationRequest& next = queue_.front()->request;
    const auto prompt = static_cast<int64_t>(next.prompt.size());
    if (prefilled > 0 && options_.prefill_tokens_per_step > 0 && prefilled + prompt > options_.prefill_tokens_per_step)
      break;  // this step has read its share of prompts
    if (!cache_->reserve(static_cast<int64_t>(batch_.size()), positions_of(next), prompt))
      break;  // the pool is spoken for: it waits for a running request to end
    prefilled += prompt;
    batch_.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  for (size_t first = admitted_from; first < batch_.size();) {
    size_t end = first + 1;
    while (end < batch_.size() && batch_[end]->request.prompt.size() == batch_[first]->request.prompt.size()) ++end;
    prefill(static_cast<int64_t>(first), static_cast<int64_t>(end - first), events);
    first = end;
  }
  for (size_t i = batch_.size(); i-- > admitted_from;)  // from the back, as below
    if (!batch_[i]->result.finish_reason.empty()) release(i);
  if (batch_.empty()) return events;
  // One token for every running request (one admitted just now too: its second).
  const auto rows = static_cast<int64_t>(batch_.size());
  std::vector<int64_t> ids;
  for (const auto& r : batch_) ids.push_back(r->pending);
  // The step's threads (Note [Decode threads]), back to the process's on the way out, errors too.
  struct Threads {
    int saved = num_threads();
    explicit Threads(int64_t n) {
      if (n > 0 && n < saved) set_num_threads(static_cast<int>(n));
    }
    ~Threads() {
      if (num_threads() != saved) set_num_threads(saved);
    }
  };
  const Tensor logits = [&] {
    const Threads threads(options_.decode_threads);
    cache_->begin_step(0, rows, 1);
    Tensor step = model_.decode(core::to_device(from_vector(ids, {rows, 1}), cache_->positions().device()), *cache_);
    cache_->end_step();
    return step;
  }();
  const std::vector<float> all = to_vector<float>(logits);
  const size_t V = all.size() / static_cast<size_t>(rows);
  std::vector<bool> ended(batch_.size(), false);
  for (size_t i = 0; i < batch_.size(); ++i) {
    Running& r = *batch_[i];
    ended[i] = take(r, r.sampler.next(std::span(all).subspan(i * V, V), r.seen), events);
  }
  for (size_t i = batch_.size(); i-- > 0;)  // from the back, so a move never brings in an unvisited one
    if (ended[i]) release(i);
  return events;
}

void Engine::cancel(int64_t id) {
  for (auto it = queue_.begin(); it != queue_.end(); ++it)
    if ((*it)->id == id) {
      queue_.erase(it);
      return;
    }
  for (size_t i = 0; i < batch_.size(); ++i)
    if (batch_[i]->id == id) return release(i);
}

bool Engine::idle() const { return queue_.empty() && batch_.empty(); }
int64_t Engine::running() const { return static_cast<int64_t>(batch_.size()); }
int64_t Engine::queued() const { return static_cast<int64_t>(queue_.size()); }

std::vector<GenerationResult> Engine::generate(const std::vector<GenerationRequest>& requests) {
  // Every request is checked (submit) before any runs: a bad one names its index.
  std::map<int64_t, size_t> index;
  std::vector<int64_t> ids;
  for (size_t i = 0; i < requests.size(); ++i) {
    try {
      ids.push_back(submit(requests[i]));
    } catch (const Error& e) {
      for (int64_t id : ids) cancel(id);
      TRI_CHECK(false, "request ", i, ": ", e.message());
    }
    index[ids.back()] = i;
  }
  std::vector<GenerationResult> results(requests.size());
  while (!idle())
    for (const StepEvent& e : step()) {
      GenerationResult& r = results[index.at(e.id)];
      if (e.token) r.tokens.push_back(*e.token);
      if (e.finish_reason) r.finish_reason = *e.finish_reason;
    }
  for (size_t i = 0; i < requests.size(); ++i) results[i].prompt_tokens = static_cast<int64_t>(requests[i].prompt.size());
  return results;
}

}  // namespace trident::infer
