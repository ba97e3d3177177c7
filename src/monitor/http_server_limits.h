// The limits of an HTTP server that clients cannot starve (monitor/http_server_bounded.h),
// apart from the server, so that users' headers need not include cpp-httplib.
#pragma once

#include <cstddef>
#include <cstdint>

namespace trident::monitor {

struct HttpServerLimits {
  // A request's line, headers and body must arrive within this many seconds of its first
  // byte; then the connection ends (a header line every 2 s no longer holds it forever).
  double request_deadline_s = 5.0;
  // Writing one answer must end within this many seconds (a client that does not read).
  double response_deadline_s = 10.0;
  // A kept-alive connection with no new request for this long is closed.
  double idle_timeout_s = 5.0;
  // Connections open at once (and the threads that serve them). One more drops the oldest
  // idle or reading one; when every one is being answered, new ones wait in a queue of this
  // length, and beyond it are refused (503).
  int max_connections = 16;
  // Requests served on one kept-alive connection.
  int max_requests_per_connection = 100;
  // Bodies longer than this are refused (413); what the client sends of one is read away
  // (under the request's deadline) so that it reads the answer rather than a reset.
  size_t max_body_bytes = 64 * 1024;
};

// Counters of what the limits did (for tests and logs); thread-safe snapshot.
struct HttpServerLimitStats {
  int64_t connections = 0;        // accepted
  int64_t evicted = 0;            // dropped for a newer connection (Note [Bounded connections])
  int64_t deadline_expired = 0;   // a request or answer that ran past its deadline
  int64_t refused = 0;            // 503: every connection busy and the queue full
  int open = 0;                   // open now
};

}  // namespace trident::monitor
