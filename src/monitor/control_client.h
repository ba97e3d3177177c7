// The client side of run control (`trident ctl URL ACTION`): GET /status, or POST /pause,
// /resume, /checkpoint, /stop with the bearer token, with connection and read timeouts.
#pragma once

#include <string>

#include "core/status.h"

namespace trident::monitor {

struct ControlReply {
  int status = 0;    // the HTTP status
  std::string body;  // the server's JSON
};

// `url`: http://host:port of rank 0's server (monitor.host, monitor.port). `action`: status,
// pause, resume, checkpoint or stop. An error names the URL when the server cannot be reached,
// and an unknown action with the allowed ones; a refusal (401, 409...) is a reply, not an error.
StatusOr<ControlReply> control_request(const std::string& url, const std::string& action, const std::string& token,
                                       const std::string& reason = "", int timeout_s = 10);

}  // namespace trident::monitor
