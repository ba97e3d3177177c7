// The monitoring HTTP server of one rank, on a background thread (cpp-httplib):
//   GET  /metrics     the registry in Prometheus' text format, with const labels (rank, job)
//   GET  /status      the run's status as JSON (monitor/run_control.h)
//   POST /pause, /resume, /checkpoint, /stop
//                     a request to the training loop, taken at the next step boundary;
//                     answered 202 with {"accepted": "<action>"}
// Every POST needs `Authorization: Bearer <token>`; without a configured token, control is
// off and every POST is refused. A POST body is optional; when present it must be a JSON
// object of at most max_body_bytes (e.g. {"reason": "..."}). Refusals change nothing and
// say why: 401 (token), 400 (body not a JSON object), 413 (body too large), 404 (path),
// 405 (method; with Allow), 409 (this rank does not take control requests: rank 0 does),
// 411 (a POST without Content-Length, answered before any body is waited for).
//
// Listens on loopback unless told otherwise. Slow, silent or many clients cannot starve it:
// a whole-request deadline per connection and a bounded number of connections, the oldest
// idle or trickling one dropped for a new one (monitor/http_server_bounded.h).
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "core/status.h"
#include "monitor/http_server_limits.h"
#include "monitor/registry.h"
#include "monitor/run_control.h"

namespace trident::monitor {

class BoundedHttpServer;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;                       // 0: any free port (tests)
  std::string token;                  // "" : control off
  size_t max_body_bytes = 64 * 1024;  // a POST body (replaces limits.max_body_bytes)
  Labels const_labels;                // on every /metrics series
  int control_rank = 0;               // where POSTs go, for 409's message
  HttpServerLimits limits;            // deadlines and the connection bound
};

class HttpServer {
 public:
  // Binds and starts serving; an error names the address when it cannot bind.
  // `control` null: this rank takes no control requests (409). Both must outlive the server.
  static StatusOr<std::unique_ptr<HttpServer>> start(const HttpServerOptions& options, const Registry& registry,
                                                     RunControl* control);
  ~HttpServer();  // stops serving and joins the thread
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  int port() const { return port_; }
  HttpServerLimitStats limit_stats() const;

 private:
  HttpServer() = default;
  std::unique_ptr<BoundedHttpServer> server_;
  std::thread thread_;
  int port_ = 0;
};

// Whether `presented` equals `expected` (never when `expected` is empty), in time that
// depends on presented.size() alone: neither the expected token's content nor its length
// shows in the timing (Note [Token comparison]).
bool token_matches(const std::string& presented, const std::string& expected);

}  // namespace trident::monitor
