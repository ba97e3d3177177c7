#include "monitor/control_client.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "monitor/run_control.h"

namespace trident::monitor {

StatusOr<ControlReply> control_request(const std::string& url, const std::string& action, const std::string& token,
                                       const std::string& reason, int timeout_s) {
  if (action != "status" && control_bit(action) == 0)
    return Status::invalid("unknown control action '" + action + "': allowed: status, pause, resume, checkpoint, stop");
  if (!url.starts_with("http://"))
    return Status::invalid("control URL '" + url + "' must start with http:// (e.g. http://127.0.0.1:9400)");
  std::string base = url;
  while (base.size() > 7 && base.back() == '/') base.pop_back();
  httplib::Client client(base);
  if (!client.is_valid()) return Status::invalid("control URL '" + url + "' is not host[:port]");
  client.set_connection_timeout(timeout_s);
  client.set_read_timeout(timeout_s);
  client.set_write_timeout(timeout_s);
  auto send = [&]() -> httplib::Result {
    if (action == "status") return client.Get("/status");
    httplib::Headers headers;
    if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
    const std::string body = reason.empty() ? "" : nlohmann::json({{"reason", reason}}).dump();
    return client.Post(("/" + action).c_str(), headers, body, "application/json");
  };
  httplib::Result r = send();
  if (!r) return Status::io_error("cannot reach " + base + ": " + httplib::to_string(r.error()));
  return ControlReply{r->status, r->body};
}

}  // namespace trident::monitor
