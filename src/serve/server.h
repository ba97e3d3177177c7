// `trident serve`: an OpenAI-compatible HTTP server over one model (vLLM's and llama.cpp's
// server's API surface): POST /v1/completions and /v1/chat/completions, plain or streamed
// (server-sent events), GET /v1/models and /health. Requests are generated together by one
// engine (serve/scheduler.h: continuous batching over a KV cache); a streaming client that goes
// away frees its slot. Every bad request gets a 4xx in OpenAI's error shape naming the field,
// and no request can stop the server (monitor/http_server_bounded.h bounds connections, bodies
// and deadlines). GET /metrics exposes Prometheus counters and histograms (requests, tokens,
// time to first token, each engine step's batch size, running, queued and cancelled requests,
// and what the HTTP server's limits did: connections evicted, deadlines, 503s). With an API
// key, every /v1 request must carry it as a bearer token (401 otherwise).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "infer/engine.h"
#include "monitor/http_server_limits.h"
#include "monitor/registry.h"

namespace trident::monitor {
class BoundedHttpServer;
}

namespace trident::serve {

class Scheduler;
struct CompletionRequest;

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                 // 0: any free port (bound_port() says which)
  std::string model_name;          // what "model" must say
  std::string chat_template;       // data/chat_template.h's name for chat completions
  std::string api_key;             // empty: none required
  int64_t max_queue = 256;         // requests waiting beyond the running batch; more get 429
  monitor::HttpServerLimits limits;
};

class Server {
 public:
  // `model` and `tokenizer` must outlive the server.
  Server(const models::CausalLM& model, const data::Tokenizer& tokenizer, const ServeOptions& options,
         const infer::EngineOptions& engine);
  ~Server();

  // Binds the port (throws naming the address when it cannot); then run() serves until stop().
  int bind();
  void run();
  void stop();
  int bound_port() const { return port_; }
  int64_t cache_bytes() const;
  int64_t cache_bytes_per_token() const;

 private:
  struct Prepared;
  Prepared prepare(const CompletionRequest& r) const;
  std::vector<int64_t> encode(const std::string& text, bool special) const;

  const models::CausalLM& model_;
  const data::Tokenizer& tokenizer_;
  ServeOptions options_;
  monitor::Registry metrics_;
  struct Metrics;
  std::unique_ptr<Metrics> m_;  // before scheduler_: its thread observes into m_ until it stops
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<monitor::BoundedHttpServer> http_;
  std::atomic<int64_t> next_id_{0};
  int port_ = -1;
};

}  // namespace trident::serve
