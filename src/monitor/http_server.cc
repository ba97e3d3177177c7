#include "monitor/http_server.h"

#include <chrono>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "monitor/http_server_bounded.h"
#include "monitor/prometheus_text.h"

namespace trident::monitor {
namespace {

// A client's path or body may be any bytes: invalid UTF-8 is replaced (U+FFFD) rather than
// thrown from dump() on a server thread, where it would end the process (found by
// fuzz/http_request_fuzz: `GET /ab\xff`).
std::string json_text(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void reply(httplib::Response& res, int code, const std::string& error) {
  res.status = code;
  res.set_content(json_text(nlohmann::json({{"error", error}})), "application/json");
}

}  // namespace

// Note [Token comparison]
// Q: What may the time of a token check reveal?
// A: Only what the client already knows: the length of what it sent. An early exit at the
//    first differing byte would reveal the matching prefix (a byte at a time), a loop over
//    the expected token's length would reveal that length, and `i % expected.size()` (the
//    old code) a division whose latency can depend on its operands.
// Q: So?
// A: One pass over the presented bytes; byte i is compared with expected[i] when i is inside
//    the expected token and with expected[0] otherwise, chosen by a mask computed without a
//    branch; differences are OR-ed into one word (no branch on data inside the loop), and
//    the length mismatch joins it in a volatile that is looked at once, at the end.
bool token_matches(const std::string& presented, const std::string& expected) {
  const size_t n = expected.size();
  if (n == 0) return false;  // the configuration, not the client: no timing to hide
  volatile size_t diff = presented.size() ^ n;
  size_t acc = 0;
  for (size_t i = 0; i < presented.size(); ++i) {
    const size_t inside = static_cast<size_t>(0) - static_cast<size_t>(i < n);  // all ones, or 0
    const size_t j = i & inside;                                                // i, or 0
    acc |= static_cast<size_t>(static_cast<unsigned char>(presented[i]) ^ static_cast<unsigned char>(expected[j]));
  }
  diff = diff | acc;
  return diff == 0;
}

StatusOr<std::unique_ptr<HttpServer>> HttpServer::start(const HttpServerOptions& options, const Registry& registry,
                                                        RunControl* control) {
  std::unique_ptr<HttpServer> s(new HttpServer());
  HttpServerLimits limits = options.limits;
  limits.max_body_bytes = options.max_body_bytes;  // httplib answers 413 past it
  s->server_ = std::make_unique<BoundedHttpServer>(limits);
  BoundedHttpServer& svr = *s->server_;
  // Note [No SO_REUSEPORT]: httplib's default socket options add SO_REUSEPORT, with which a
  // second run on the same port binds too and the kernel splits the scrapes and control
  // requests between them. SO_REUSEADDR alone still allows a restart over TIME_WAIT.
  svr.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  const HttpServerOptions opt = options;

  svr.route("GET", "/metrics", [&registry, opt](const httplib::Request&, httplib::Response& res) {
    res.set_content(prometheus_text(registry, opt.const_labels), kPrometheusContentType);
  });
  svr.route("GET", "/status", [control, opt](const httplib::Request&, httplib::Response& res) {
    if (control == nullptr)
      return reply(res, 409, "this rank does not report the run's status: rank " + std::to_string(opt.control_rank) +
                                 " does");
    res.set_content(control->status_json() + "\n", "application/json");
  });
  svr.route("POST", R"(/(pause|resume|checkpoint|stop))", [control, opt](const httplib::Request& req, httplib::Response& res) {
    const std::string action = req.matches[1];
    if (opt.token.empty())
      return reply(res, 401, "run control is off: no token configured (set TRIDENT_CONTROL_TOKEN or monitor.token_file)");
    const std::string auth = req.get_header_value("Authorization");
    if (!auth.starts_with("Bearer ") || !token_matches(auth.substr(7), opt.token))
      return reply(res, 401, auth.empty() ? "missing 'Authorization: Bearer <token>'" : "wrong token");
    std::string reason = "POST /" + action;
    if (!req.body.empty()) {
      const nlohmann::json body = nlohmann::json::parse(req.body, nullptr, /*allow_exceptions=*/false);
      if (body.is_discarded() || !body.is_object())
        return reply(res, 400, "the body must be empty or a JSON object, e.g. {\"reason\": \"...\"}");
      if (body.contains("reason")) {
        if (!body["reason"].is_string()) return reply(res, 400, "\"reason\" must be a string");
        reason += ": " + body["reason"].get<std::string>();
      }
    }
    if (control == nullptr)
      return reply(res, 409, "this rank does not take control requests: rank " + std::to_string(opt.control_rank) +
                                 " does");
    control->request(control_bit(action), reason);
    res.status = 202;
    res.set_content(json_text(nlohmann::json({{"accepted", action}})), "application/json");
  });
  // 405 (a path that exists with other methods) and 411 come from BoundedHttpServer, with
  // an empty body that this fills.
  svr.set_error_handler([opt](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a handler's own refusal
    if (res.status == 404)
      reply(res, 404, "no such path: " + req.path + " (GET /metrics, /status; POST /pause, /resume, /checkpoint, /stop)");
    else if (res.status == 405)
      reply(res, 405, req.method + " " + req.path + " is not allowed (allowed: " + res.get_header_value("Allow") + ")");
    else if (res.status == 411)
      reply(res, 411, req.method + " needs a Content-Length header (0 for no body)");
    else if (res.status == 413)
      reply(res, 413, "the body is larger than " + std::to_string(opt.max_body_bytes) + " bytes");
  });

  if (options.port == 0) {
    s->port_ = svr.bind_to_any_port(options.host);
    if (s->port_ <= 0) return Status::io_error("monitor: cannot listen on " + options.host + " (any port)");
  } else {
    if (!svr.bind_to_port(options.host, options.port))
      return Status::io_error("monitor: cannot listen on " + options.host + ":" + std::to_string(options.port) +
                              " (monitor.host, monitor.port + local rank): in use, or not an address of this host");
    s->port_ = options.port;
  }
  s->thread_ = std::thread([&svr] { svr.listen_after_bind(); });
  // stop() only stops a running server: wait (bounded) until it runs.
  for (int i = 0; i < 500 && !svr.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return s;
}

HttpServerLimitStats HttpServer::limit_stats() const { return server_->limit_stats(); }

HttpServer::~HttpServer() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace trident::monitor
