#include "serve/scheduler.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "core/check.h"

namespace trident::serve {

std::optional<infer::StepEvent> Stream::next(int64_t timeout_ms) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return !events_.empty() || !error_.empty(); }))
    return std::nullopt;
  if (events_.empty()) return infer::StepEvent{id_, std::nullopt, "error"};
  infer::StepEvent e = events_.front();
  events_.pop_front();
  return e;
}

std::string Stream::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

void Stream::push(const infer::StepEvent& e) {
  {
    std::lock_guard lock(mu_);
    events_.push_back(e);
  }
  cv_.notify_all();
}

void Stream::fail(const std::string& message) {
  {
    std::lock_guard lock(mu_);
    error_ = message;
  }
  cv_.notify_all();
}

Scheduler::Scheduler(const models::CausalLM& model, const infer::EngineOptions& options, StepObserver on_step)
    : on_step_(std::move(on_step)), engine_(model, options) {
  options_ = engine_.options();
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::shared_ptr<Stream> Scheduler::submit(const infer::GenerationRequest& request) {
  // The engine's checks, here, so the handler can answer 400 (the engine's thread checks again).
  engine_.check(request);
  infer::GenerationRequest copy = request;
  auto stream = std::make_shared<Stream>();
  {
    std::lock_guard lock(mu_);
    TRI_CHECK(!stop_, "the server is stopping");
    inbox_.emplace_back(std::move(copy), stream);
  }
  cv_.notify_all();
  return stream;
}

void Scheduler::cancel(const std::shared_ptr<Stream>& stream) {
  {
    std::lock_guard lock(mu_);
    cancels_.push_back(stream);
  }
  cv_.notify_all();
}

std::pair<int64_t, int64_t> Scheduler::load() const {
  std::lock_guard lock(mu_);
  return {running_, queued_ + static_cast<int64_t>(inbox_.size())};
}

int64_t Scheduler::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

void Scheduler::loop() {
  std::map<int64_t, std::shared_ptr<Stream>> by_id;
  for (;;) {
    std::vector<std::pair<infer::GenerationRequest, std::shared_ptr<Stream>>> inbox;
    std::vector<std::shared_ptr<Stream>> cancels;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !inbox_.empty() || !cancels_.empty() || !engine_.idle(); });
      if (stop_) break;
      inbox.swap(inbox_);
      cancels.swap(cancels_);
    }
    for (auto& [request, stream] : inbox) {
      try {
        stream->id_ = engine_.submit(request);
        by_id[stream->id_] = stream;
      } catch (const std::exception& e) {
        stream->fail(e.what());
      }
    }
    int64_t freed = 0;
    for (const auto& stream : cancels)
      if (by_id.erase(stream->id_) > 0) {  // not ended yet (an ended request left by_id)
        engine_.cancel(stream->id_);
        ++freed;
      }
    if (freed > 0) {
      std::lock_guard lock(mu_);
      cancelled_ += freed;
    }
    if (engine_.idle()) {
      std::lock_guard lock(mu_);
      running_ = queued_ = 0;
      continue;
    }
    try {
      const std::vector<infer::StepEvent> events = engine_.step();
      if (on_step_) {
        std::set<int64_t> batch;
        for (const infer::StepEvent& e : events)
          if (e.token) batch.insert(e.id);
        if (!batch.empty()) on_step_(static_cast<int64_t>(batch.size()));
      }
      for (const infer::StepEvent& e : events) {
        const auto it = by_id.find(e.id);
        if (it == by_id.end()) continue;
        it->second->push(e);
        if (e.finish_reason) by_id.erase(it);
      }
    } catch (const std::exception& e) {  // an engine failure ends every request it holds
      for (auto& [id, stream] : by_id) {
        engine_.cancel(id);
        stream->fail(e.what());
      }
      by_id.clear();
    }
    std::lock_guard lock(mu_);
    running_ = engine_.running();
    queued_ = engine_.queued();
  }
  for (auto& [id, stream] : by_id) stream->fail("the server is stopping");
}

}  // namespace trident::serve
