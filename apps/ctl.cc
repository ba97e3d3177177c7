// `trident ctl`: run control from the command line (monitor/control_client.h).
#include <cstdio>

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

Status run_ctl(const CtlArgs& a) {
  std::string token;
  if (a.action != "status") {
    monitor::MonitorOptions opt;
    opt.token_file = a.token_file;
    auto t = monitor::resolve_control_token(opt);
    if (!t.is_ok()) return t.status();
    token = t.value();
    if (token.empty())
      return Status::invalid(std::string("no control token: set ") + monitor::kControlTokenEnv + " or pass --token-file");
  }
  auto r = monitor::control_request(a.url, a.action, token, a.reason, a.timeout_s);
  if (!r.is_ok()) return r.status();
  std::printf("%s", r.value().body.c_str());
  if (r.value().status >= 300)
    return Status::invalid(a.url + " refused " + a.action + " with HTTP " + std::to_string(r.value().status) + ": " +
                           r.value().body);
  return Status::ok();
}

}  // namespace trident::cli
