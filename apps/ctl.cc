// `trident ctl`: run control from the command line (monitor/control_client.h).
#include <cstdio>
#include <string_view>

#include "commands.h"
#include "monitor/control_client.h"
#include "monitor/monitor_options.h"

namespace trident::cli {

CLI::App* add_ctl(CLI::App& app, CtlArgs& a) {
  CLI::App* c = app.add_subcommand("ctl", "Control a running training run: status, pause, resume, checkpoint, stop");
  c->add_option("url", a.url, "rank 0's server, http://HOST:PORT (the run's monitor.host and monitor.port)")->required();
  c->add_option("action", a.action, "what to do")
      ->required()
      ->check(CLI::IsMember({"status", "pause", "resume", "checkpoint", "stop"}));
  c->add_option("--token-file", a.token_file, "file with the bearer token (used when $TRIDENT_CONTROL_TOKEN is not set)");
  c->add_option("--reason", a.reason, "why (shown in the run's log and GET /status)");
  c->add_option("--timeout", a.timeout_s, "seconds to wait for the server")->check(CLI::Range(1, 600));
  c->footer("A request takes effect at the run's next step boundary, on every rank at the same step.\n"
            "stop: checkpoint, then the run exits with status 75 (the same command resumes it).");
  return c;
}

namespace {

// The port of an http://HOST[:PORT][/] URL is 1 to 65535 (none: 80); the HTTP client would take
// 99999 or "abc" and fail to connect, blaming the connection.
Status check_url_port(const std::string& url) {
  if (!url.starts_with("http://")) return Status::ok();  // control_request names what is wrong
  std::string_view hostport = std::string_view(url).substr(7);
  hostport = hostport.substr(0, hostport.find('/'));
  const size_t bracket = hostport.rfind(']');  // an IPv6 address: [::1]:9400
  const size_t colon = hostport.rfind(':');
  if (colon == std::string_view::npos || (bracket != std::string_view::npos && colon < bracket)) return Status::ok();
  const std::string_view port = hostport.substr(colon + 1);
  int64_t n = 0;
  bool ok = !port.empty() && port.size() <= 5;
  for (char c : port) {
    ok = ok && c >= '0' && c <= '9';
    n = n * 10 + (c - '0');
  }
  if (ok && n >= 1 && n <= 65535) return Status::ok();
  return Status::invalid("ctl: the url '" + url + "' has port '" + std::string(port) +
                         "': allowed 1-65535 (the run's monitor.port, or monitor.port + local rank)");
}

}  // namespace

Status run_ctl(const CtlArgs& a) {
  if (Status s = check_url_port(a.url); !s.is_ok()) return s;
  std::string token;
  if (a.action != "status") {
    monitor::MonitorOptions opt;
    opt.token_file = a.token_file;
    auto t = monitor::resolve_control_token(opt, "--token-file \"" + a.token_file + "\"");
    if (!t.is_ok()) return t.status();
    token = t.value();
    if (token.empty())
      return Status::invalid(std::string("no control token: set ") + monitor::kControlTokenEnv + " or pass --token-file");
  }
  auto r = monitor::control_request(a.url, a.action, token, a.reason, a.timeout_s);
  if (!r.is_ok()) {
    if (r.status().kind() != ErrorKind::kIO) return r.status();
    return Status::io_error(r.status().message() +
                            " (is the run still going, and is this its rank 0 server: monitor.host and monitor.port, "
                            "with monitor.port > 0? A slow server may need a longer --timeout than " +
                            std::to_string(a.timeout_s) + " s)");
  }
  std::printf("%s", r.value().body.c_str());
  if (r.value().status >= 300)
    return Status::invalid(a.url + " refused " + a.action + " with HTTP " + std::to_string(r.value().status) + ": " +
                           r.value().body);
  return Status::ok();
}

}  // namespace trident::cli
