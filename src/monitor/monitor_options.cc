#include "monitor/monitor_options.h"

#include <cstdlib>
#include <fstream>

namespace trident::monitor {

const OptionTable<MonitorOptions>& MonitorOptions::table() {
  static const auto t =
      OptionTable<MonitorOptions>("monitor", "Metrics endpoint, TensorBoard files and run control")
          .add("port", &MonitorOptions::port,
               "HTTP port of rank 0's server (GET /metrics for Prometheus, GET /status, POST /pause /resume "
               "/checkpoint /stop); each rank serves on port + its local rank; 0: no server",
               Range::between(0, 65535))
          .add("host", &MonitorOptions::host, "address the servers listen on (loopback unless told otherwise)")
          .add("job", &MonitorOptions::job, "the `job` label on every Prometheus series")
          .add("token_file", &MonitorOptions::token_file,
               "file whose first line is the bearer token every POST needs (the environment's "
               "TRIDENT_CONTROL_TOKEN wins); neither: control is off")
          .add("tensorboard", &MonitorOptions::tensorboard,
               "write TensorBoard scalar event files (events.out.tfevents.*) in train.out_dir (rank 0)")
          .add("system_interval", &MonitorOptions::system_interval,
               "seconds between samples of the process's RSS, CPU time and network bytes (/proc)", Range::positive())
          .add("notify_cooldown", &MonitorOptions::notify_cooldown,
               "seconds after an alert rule's notification during which its further firings are counted, not "
               "sent (the next notification says how many); 0: every firing notifies",
               Range::between(0.0, 7 * 86400.0))
          .add("notify_timeout", &MonitorOptions::notify_timeout,
               "seconds one try of a webhook or e-mail may take (3 tries, from a background thread); at the "
               "end of the run, unsent notifications get at most this long",
               Range::between(0.1, 600.0));
  return t;
}

StatusOr<std::string> resolve_control_token(const MonitorOptions& options, const std::string& source) {
  const std::string named = source.empty() ? "monitor.token_file = \"" + options.token_file + "\"" : source;
  if (const char* env = std::getenv(kControlTokenEnv); env != nullptr && *env != '\0') return std::string(env);
  if (options.token_file.empty()) return std::string();
  std::ifstream in(options.token_file);
  std::string token;
  if (!in || !std::getline(in, token))
    return Status::io_error(named + ": cannot read a token from it");
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ' || token.back() == '\t')) token.pop_back();
  if (token.empty())
    return Status::invalid(named + ": its first line is empty (the token)");
  return token;
}

}  // namespace trident::monitor
