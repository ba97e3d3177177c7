// Notifications of alert events through libcurl: an HTTP POST of the event's JSON to a
// webhook, and an e-mail through an SMTP server. Both have connect and total timeouts and can
// be aborted from another thread, so a dead endpoint costs seconds of a background thread,
// never a hang; failures are returned, and the caller logs them (a failed notification must
// not stop training). Callers on the training thread go through monitor/notification_queue.h,
// never these directly: see Note [Notifications off the training thread] there.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "core/status.h"

namespace trident::monitor {

struct NotifySendOptions {
  double connect_timeout_s = 5.0;  // TCP (and TLS) connect
  double timeout_s = 10.0;         // the whole transfer, connect included
  // When set and it becomes true, a transfer in progress ends (within about a second) with
  // an error saying it was aborted.
  const std::atomic<bool>* abort = nullptr;
};

// POSTs `json` (Content-Type: application/json) to `url`; an error for a transport failure or
// a status >= 300, naming the URL.
[[nodiscard]] Status post_webhook(const std::string& url, const std::string& json, const NotifySendOptions& options = {});

// Sends a plain-text e-mail through `smtp_url` (smtp://host:port); the message is
// format_email's, dated now.
[[nodiscard]] Status send_email(const std::string& smtp_url, const std::string& from, const std::string& to,
                                const std::string& subject, const std::string& body,
                                const NotifySendOptions& options = {});

// The e-mail's text (RFC 5322): From, To, Subject, Date (e.g. "Sat, 28 Nov 2026 23:40:07
// +0000"), a Message-ID unique to this message (<time.counter.pid.random@host>), the
// content type, a blank line and the body, lines ending in CRLF. A body line that is a lone
// "." is doubled (SMTP's end-of-data marker).
std::string format_email(const std::string& from, const std::string& to, const std::string& subject,
                         const std::string& body, std::chrono::system_clock::time_point when, const std::string& host);

// This host's name (gethostname), "localhost" when it has none.
std::string host_name();

}  // namespace trident::monitor
