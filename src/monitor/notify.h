// Notifications of alert events through libcurl: an HTTP POST of the event's JSON to a
// webhook, and an e-mail through an SMTP server. Both have connect and total timeouts, so a
// dead endpoint costs the run seconds, never a hang; failures are returned, and the caller
// logs them (a failed notification must not stop training).
#pragma once

#include <string>

#include "core/status.h"

namespace trident::monitor {

// POSTs `json` (Content-Type: application/json) to `url`; an error for a transport failure or
// a status >= 300, naming the URL.
[[nodiscard]] Status post_webhook(const std::string& url, const std::string& json, long timeout_s = 10);

// Sends a plain-text e-mail through `smtp_url` (smtp://host:port).
[[nodiscard]] Status send_email(const std::string& smtp_url, const std::string& from, const std::string& to,
                                const std::string& subject, const std::string& body, long timeout_s = 10);

}  // namespace trident::monitor
