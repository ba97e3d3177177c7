// The thread that owns a generation engine (infer/engine.h) for a server: HTTP handlers submit
// requests from their own threads and read each request's events from its Stream as the
// engine's steps make them; a handler whose client has gone cancels its stream, which frees the
// request's slot at the next step. The engine runs a step whenever any request is queued or
// running and sleeps otherwise. An observer sees each step's batch size (for /metrics).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "infer/engine.h"

namespace trident::serve {

// One request's events, filled by the scheduler's thread and read by its handler.
class Stream {
 public:
  // The next event, waiting up to `timeout_ms`; nullopt on timeout. After the event with a
  // finish reason (or an error) there are no more.
  std::optional<infer::StepEvent> next(int64_t timeout_ms);
  // An engine error that ended the request (empty: none).
  std::string error() const;

 private:
  friend class Scheduler;
  void push(const infer::StepEvent& e);
  void fail(const std::string& message);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<infer::StepEvent> events_;
  std::string error_;
  int64_t id_ = -1;
  bool cancelled_ = false;
};

class Scheduler {
 public:
  // Called on the scheduler's thread after each engine step with the number of requests that
  // took a token in it (the step's batch size, newly admitted ones included).
  using StepObserver = std::function<void(int64_t batch)>;

  // Owns a generation engine over `model` (which must outlive it).
  Scheduler(const models::CausalLM& model, const infer::EngineOptions& options, StepObserver on_step = {});
  ~Scheduler();  // stops the thread; streams still open end with an error

  // Queues a request (checked here, on the caller's thread: a bad one throws, naming the field).
  std::shared_ptr<Stream> submit(const infer::GenerationRequest& request);
  // The request's client is gone (or it needs no more tokens): its slot is freed.
  void cancel(const std::shared_ptr<Stream>& stream);

  int64_t context() const { return options_.capacity; }
  // The KV cache's bytes (fixed when the engine is made).
  int64_t cache_bytes() const { return engine_.cache().bytes(); }
  int64_t cache_bytes_per_token() const { return engine_.cache().bytes_per_token(); }
  // Requests running and queued now.
  std::pair<int64_t, int64_t> load() const;
  // Requests cancelled while the engine still held them (their slots or places in the queue
  // freed early): a client gone, a stop string, a deadline.
  int64_t cancelled() const;

 private:
  void loop();

  infer::EngineOptions options_;
  StepObserver on_step_;
  infer::Engine engine_;  // driven by the thread only, after construction (check() is safe from any)
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<infer::GenerationRequest, std::shared_ptr<Stream>>> inbox_;
  std::vector<std::shared_ptr<Stream>> cancels_;
  int64_t running_ = 0, queued_ = 0, cancelled_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace trident::serve
