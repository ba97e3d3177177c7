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
// 405 (method), 409 (this rank does not take control requests: rank 0 does).
//
// Listens on loopback unless told otherwise; sockets have read/write timeouts, so a slow or
// silent client cannot hold a server thread.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "core/status.h"
#include "monitor/registry.h"
#include "monitor/run_control.h"

namespace httplib {
class Server;
}

namespace trident::monitor {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;                       // 0: any free port (tests)
  std::string token;                  // "" : control off
  size_t max_body_bytes = 64 * 1024;
  Labels const_labels;                // on every /metrics series
  int control_rank = 0;               // where POSTs go, for 409's message
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

 private:
  HttpServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

// Constant-time comparison of a presented token with the configured one.
bool token_matches(const std::string& presented, const std::string& expected);

}  // namespace trident::monitor
