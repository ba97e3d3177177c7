#include "monitor/control_client.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "monitor/run_control.h"

namespace trident::monitor {

namespace {

// httplib's error, in words that say what to look at ("Connection" alone did not).
std::string failure_reason(httplib::Error e, int timeout_s) {
  switch (e) {
    case httplib::Error::Connection:
      return "connection refused or host unreachable";
    case httplib::Error::ConnectionTimeout:
      return "no connection within " + std::to_string(timeout_s) + " s";
    case httplib::Error::Read:
      return "no reply within " + std::to_string(timeout_s) + " s, or the connection closed";
    case httplib::Error::Write:
      return "the request could not be sent (the connection closed)";
    default:
      return httplib::to_string(e);
  }
}

}  // namespace

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
  if (!r) return Status::io_error("cannot reach " + base + ": " + failure_reason(r.error(), timeout_s));
  return ControlReply{r->status, r->body};
}

}  // namespace trident::monitor
