// The [monitor] section: where a run publishes its metrics (the HTTP endpoint for
// Prometheus, TensorBoard event files), how it is controlled (the token for POSTs) and how
// its alerts' notifications leave (monitor/notification_queue.h).
#pragma once

#include <cstdint>
#include <string>

#include "core/options.h"
#include "core/status.h"

namespace trident::monitor {

struct MonitorOptions {
  int64_t port = 0;                 // HTTP server of rank r on port + local rank (0: no server)
  std::string host = "127.0.0.1";   // the server's address: loopback unless told otherwise
  std::string job = "trident";      // the `job` label of every Prometheus series
  std::string token_file = "";      // file holding the control token (TRIDENT_CONTROL_TOKEN wins)
  bool tensorboard = true;          // write <out_dir>/events.out.tfevents.* (rank 0)
  double system_interval = 1.0;     // seconds between samples of /proc (RSS, CPU, network)
  double notify_cooldown = 300.0;   // a rule notifies at most once per this many seconds (0: every firing)
  double notify_timeout = 10.0;     // seconds per try of a webhook or e-mail; also what the run's end waits for them
  static const OptionTable<MonitorOptions>& table();
};

// The environment variable that holds the control token.
inline constexpr const char* kControlTokenEnv = "TRIDENT_CONTROL_TOKEN";

// The control token: $TRIDENT_CONTROL_TOKEN, else the first line of monitor.token_file, else
// "" (control off). An error names a token file that cannot be read or is empty.
// `source` names where token_file came from in errors (default: the config key).
StatusOr<std::string> resolve_control_token(const MonitorOptions& options, const std::string& source = "");

}  // namespace trident::monitor
