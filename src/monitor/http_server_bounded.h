// An HTTP/1.1 server (cpp-httplib's Server) that slow or idle clients cannot starve: every
// request has a whole-request deadline (its line, headers and body, from its first byte),
// every answer a write deadline, and the number of open connections is bounded; a new
// connection beyond the bound drops the open one that has been idle or reading a request the
// longest (Note [Bounded connections]). It also answers at once what HTTP lets a server say
// without reading a body: 411 for a POST, PUT or PATCH without Content-Length (cpp-httplib
// would otherwise read such a body until the connection ends), and 405 with an Allow header
// for a path that exists with other methods.
//
// Reusable as is: the monitor and control server (monitor/http_server.h) is one user; a
// server facing the network (inference) is meant to be another. Not here: routes of any
// particular service, TLS, HTTP/2.
//
// Use: construct with HttpServerLimits, add routes with route() (so 405 knows the paths; a
// route added with httplib's Get()/Post() directly is served but unknown to 405), optionally
// set_error_handler (the 404/405/411/413 answers come with an empty body for it to fill),
// bind, listen_after_bind() on a thread of its own; stop() (httplib's) ends it, and the
// connections open then are ended at once. Do not call set_pre_routing_handler or replace
// new_task_queue: the limits live there.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include "monitor/http_server_limits.h"

namespace trident::monitor {

class BoundedHttpServer : public httplib::Server {
 public:
  explicit BoundedHttpServer(const HttpServerLimits& limits);
  ~BoundedHttpServer() override;
  BoundedHttpServer(const BoundedHttpServer&) = delete;
  BoundedHttpServer& operator=(const BoundedHttpServer&) = delete;

  // Serves `method` (GET, POST, PUT, PATCH, DELETE, OPTIONS) on paths matching `pattern`
  // (a whole-path regex, as httplib's); GET also serves HEAD.
  BoundedHttpServer& route(const std::string& method, const std::string& pattern, Handler handler);
  const HttpServerLimits& limits() const { return limits_; }
  HttpServerLimitStats limit_stats() const;

  // Implementation pieces, public only for the .cc's helpers.
  struct Connection;
  class Pool;

 private:
  bool process_and_close_socket(socket_t sock) override;
  HandlerResponse before_routing(const httplib::Request& req, httplib::Response& res);

  HttpServerLimits limits_;
  struct Route {
    std::string method;
    std::regex pattern;
  };
  std::vector<Route> routes_;

  // Note [Bounded connections]: the open connections, under mu_.
  mutable std::mutex mu_;
  std::list<Connection*> open_;
  int live_ = 0;     // open and not yet told to go
  int pending_ = 0;  // accepted, waiting for a thread
  bool stopping_ = false;
  HttpServerLimitStats stats_;

  friend class Pool;
  void evict_one_locked();
  void end_all_connections();
};

}  // namespace trident::monitor
