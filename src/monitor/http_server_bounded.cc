#include "monitor/http_server_bounded.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <thread>

namespace trident::monitor {

using Clock = std::chrono::steady_clock;

// Note [Bounded connections]
// Q: Why were a dozen trickling clients enough to make /metrics unreachable?
// A: cpp-httplib serves each connection on a pool thread (8 here) and its socket timeouts
//    are per read: a client that sends one header line every 2 s never times out, so a few
//    such clients hold every thread and new connections wait in the pool's queue for ever.
// Q: What bounds them now?
// A: Two things. Each connection is served by process_and_close_socket below (our override),
//    which reads through DeadlineStream: every read waits at most until the request's
//    deadline (request_deadline_s after its first byte), so a request either arrives whole
//    in time or its connection ends. And the pool (Pool) has max_connections threads; when a
//    connection arrives and max_connections are open, the one that has been idle (between
//    requests) or reading a request the longest is told to go: its socket is shutdown(), its
//    thread's poll wakes at once, and the thread serves the newcomer. A connection whose
//    request is being answered is never dropped; when every one is, newcomers queue (up to
//    max_connections of them) and beyond that get a 503 on the accepting thread.
// Q: Can shutdown() hit a reused descriptor (the connection closed, its number reused)?
// A: No: a connection is registered in open_ from its first line to just before its socket
//    is closed, both under mu_, and eviction shuts a socket down only while holding mu_ and
//    finding it registered. So no dup() of the descriptor is needed.
// Q: How does the server know "being answered" from "reading a request"?
// A: The pre-routing handler runs once the request line and headers are in (before any body
//    is read); it marks the thread's connection (thread_local) as handling. The body is still
//    read under the request's deadline.
// See also Note [Lingering close].

struct BoundedHttpServer::Connection {
  enum class State { kIdle, kReading, kHandling };
  int fd = -1;
  State state = State::kIdle;
  Clock::time_point since = Clock::now();
  bool told_to_go = false;   // evicted, or the server is stopping
  bool close_after = false;  // answered without reading its body: the framing is lost
  // Bytes received and not yet consumed (a pipelined next request survives its predecessor).
  char buf[4096];
  size_t pos = 0, end = 0;
};

namespace {

thread_local BoundedHttpServer::Connection* t_connection = nullptr;
thread_local bool t_refuse = false;

// Waits until `fd` is ready for `events` or `deadline` passes (false; *expired set).
bool wait_for(int fd, short events, Clock::time_point deadline, bool* expired) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      *expired = true;
      return false;
    }
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000 * 1000)));
    if (rc > 0) return true;  // ready, or hung up / in error: the read or write says which
    if (rc < 0 && errno != EINTR) return false;
  }
}

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

void address_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if ((peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
            : ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len)) != 0)
    return;
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
    port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
    port = ntohs(v6->sin6_port);
  }
  ip = text;
}

// One request's view of its connection: reads end at the request's deadline, an answer's
// writes at the answer's (from its first byte written).
class DeadlineStream final : public httplib::Stream {
 public:
  DeadlineStream(BoundedHttpServer::Connection& c, Clock::time_point read_deadline, double write_s)
      : c_(c), read_deadline_(read_deadline), write_s_(write_s) {}
  bool expired() const { return expired_; }

  bool is_readable() const override {
    return c_.pos < c_.end || wait_for(c_.fd, POLLIN, read_deadline_, &expired_);
  }
  bool is_writable() const override { return wait_for(c_.fd, POLLOUT, write_deadline(), &expired_); }

  ssize_t read(char* ptr, size_t size) override {
    if (c_.pos == c_.end) {
      if (!wait_for(c_.fd, POLLIN, read_deadline_, &expired_)) return -1;
      ssize_t n;
      do {
        n = ::recv(c_.fd, c_.buf, sizeof c_.buf, MSG_DONTWAIT);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return n < 0 && errno == EAGAIN ? read(ptr, size) : n;
      c_.pos = 0;
      c_.end = static_cast<size_t>(n);
    }
    const size_t k = std::min(size, c_.end - c_.pos);
    std::memcpy(ptr, c_.buf + c_.pos, k);
    c_.pos += k;
    return static_cast<ssize_t>(k);
  }

  // All of it or -1 (httplib's write_format does not retry a short write).
  ssize_t write(const char* ptr, size_t size) override {
    size_t done = 0;
    while (done < size) {
      if (!wait_for(c_.fd, POLLOUT, write_deadline(), &expired_)) return -1;
      const ssize_t n = ::send(c_.fd, ptr + done, size - done, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
        return -1;
      }
      done += static_cast<size_t>(n);
    }
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(c_.fd, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(c_.fd, false, ip, port); }
  socket_t socket() const override { return c_.fd; }

 private:
  Clock::time_point write_deadline() const {
    if (!write_started_) {
      write_deadline_ = after(write_s_);
      write_started_ = true;
    }
    return write_deadline_;
  }

  BoundedHttpServer::Connection& c_;
  Clock::time_point read_deadline_;
  double write_s_;
  mutable Clock::time_point write_deadline_;
  mutable bool write_started_ = false;
  mutable bool expired_ = false;
};

// Note [Lingering close]: a connection answered before its body was read (411, 405) still
// has the client's bytes coming; closing it with unread bytes makes the kernel send a reset,
// which can destroy the answer before the client reads it. So the answer is followed by
// shutdown(SHUT_WR) and what the client still sends is read away, briefly and boundedly.
void linger(int fd) {
  ::shutdown(fd, SHUT_WR);
  const Clock::time_point deadline = after(0.5);
  char sink[4096];
  for (size_t total = 0; total < (1u << 20);) {
    bool expired = false;
    if (!wait_for(fd, POLLIN, deadline, &expired)) return;
    const ssize_t n = ::recv(fd, sink, sizeof sink, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return;
    if (n > 0) total += static_cast<size_t>(n);
  }
}

}  // namespace

// The threads that serve connections; see Note [Bounded connections].
class BoundedHttpServer::Pool final : public httplib::TaskQueue {
 public:
  Pool(BoundedHttpServer& server, int threads) : server_(server) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
  }

  void enqueue(std::function<void()> fn) override {
    const int max = server_.limits_.max_connections;
    {
      std::lock_guard<std::mutex> lock(server_.mu_);
      if (server_.live_ + server_.pending_ >= max) server_.evict_one_locked();
      if (server_.pending_ < max) {
        ++server_.pending_;
        jobs_.push_back(std::move(fn));
        ready_.notify_one();
        return;
      }
      ++server_.stats_.refused;
    }
    t_refuse = true;  // every connection is busy answering and the queue is full
    fn();
    t_refuse = false;
  }

  void shutdown() override {
    server_.end_all_connections();
    {
      std::lock_guard<std::mutex> lock(server_.mu_);
      done_ = true;
    }
    ready_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(server_.mu_);
        ready_.wait(lock, [&] { return done_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // done
        fn = std::move(jobs_.front());
        jobs_.pop_front();
      }
      fn();
    }
  }

  BoundedHttpServer& server_;
  std::vector<std::thread> threads_;
  std::list<std::function<void()>> jobs_;  // under server_.mu_
  std::condition_variable ready_;
  bool done_ = false;
};

BoundedHttpServer::BoundedHttpServer(const HttpServerLimits& limits) : limits_(limits) {
  limits_.max_connections = std::max(1, limits_.max_connections);
  limits_.max_requests_per_connection = std::max(1, limits_.max_requests_per_connection);
  new_task_queue = [this] { return new Pool(*this, limits_.max_connections); };
  set_payload_max_length(limits_.max_body_bytes);
  set_keep_alive_timeout(static_cast<time_t>(std::max(1.0, limits_.idle_timeout_s)));  // the Keep-Alive header
  set_keep_alive_max_count(static_cast<size_t>(limits_.max_requests_per_connection));
  set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) { return before_routing(req, res); });
}

BoundedHttpServer::~BoundedHttpServer() = default;

BoundedHttpServer& BoundedHttpServer::route(const std::string& method, const std::string& pattern, Handler handler) {
  routes_.push_back({method, std::regex(pattern)});
  if (method == "GET") Get(pattern, std::move(handler));
  else if (method == "POST") Post(pattern, std::move(handler));
  else if (method == "PUT") Put(pattern, std::move(handler));
  else if (method == "PATCH") Patch(pattern, std::move(handler));
  else if (method == "DELETE") Delete(pattern, std::move(handler));
  else if (method == "OPTIONS") Options(pattern, std::move(handler));
  else routes_.pop_back();  // a method httplib does not route: the path is not served with it
  return *this;
}

HttpServerLimitStats BoundedHttpServer::limit_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  HttpServerLimitStats s = stats_;
  s.open = static_cast<int>(open_.size());
  return s;
}

void BoundedHttpServer::evict_one_locked() {
  Connection* victim = nullptr;
  for (Connection* c : open_)
    if (!c->told_to_go && c->state != Connection::State::kHandling && (victim == nullptr || c->since < victim->since))
      victim = c;
  if (victim == nullptr) return;
  victim->told_to_go = true;
  --live_;
  ++stats_.evicted;
  ::shutdown(victim->fd, SHUT_RDWR);  // its poll or recv returns now; its thread closes it
}

void BoundedHttpServer::end_all_connections() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;
  for (Connection* c : open_)
    if (!c->told_to_go) {
      c->told_to_go = true;
      --live_;
      ::shutdown(c->fd, SHUT_RDWR);
    }
}

// What HTTP lets the server answer before reading a body; the rest goes to httplib's routing.
httplib::Server::HandlerResponse BoundedHttpServer::before_routing(const httplib::Request& req,
                                                                   httplib::Response& res) {
  if (Connection* c = t_connection) {
    std::lock_guard<std::mutex> lock(mu_);
    c->state = Connection::State::kHandling;
    c->since = Clock::now();
  }
  const bool has_body = req.method == "POST" || req.method == "PUT" || req.method == "PATCH" ||
                        req.method == "DELETE" || req.method == "PRI";  // httplib reads a body for these
  auto answer_now = [&](int status) {
    res.status = status;
    if (has_body) {  // its body, if any, is not read: the connection cannot carry another request
      res.set_header("Connection", "close");
      if (t_connection != nullptr) t_connection->close_after = true;
    }
    return HandlerResponse::Handled;
  };
  bool path_known = false, allowed = false;
  std::vector<std::string> allow;
  for (const Route& r : routes_)
    if (std::regex_match(req.path, r.pattern)) {
      path_known = true;
      allowed = allowed || r.method == req.method || (req.method == "HEAD" && r.method == "GET");
      for (const std::string& m : r.method == "GET" ? std::vector<std::string>{"GET", "HEAD"} : std::vector{r.method})
        if (std::find(allow.begin(), allow.end(), m) == allow.end()) allow.push_back(m);
    }
  if (path_known && !allowed) {
    std::string list;
    for (const std::string& m : allow) list += (list.empty() ? "" : ", ") + m;
    res.set_header("Allow", list);
    return answer_now(405);
  }
  if (has_body) {
    // Content-Length is the only framing accepted: without it httplib reads until the
    // client closes, and a chunked body is not bounded by max_body_bytes there.
    if (!req.has_header("Content-Length") || req.has_header("Transfer-Encoding")) return answer_now(411);
    const std::string n = req.get_header_value("Content-Length");
    if (n.empty() || n.size() > 19 || !std::all_of(n.begin(), n.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
      return answer_now(400);
    // A body over max_body_bytes: httplib reads it away (under the request's deadline) and
    // answers 413, so the client reads the answer rather than a reset.
  }
  return HandlerResponse::Unhandled;
}

bool BoundedHttpServer::process_and_close_socket(socket_t sock) {
  if (t_refuse) {
    static const char kBusy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    (void)::send(sock, kBusy, sizeof kBusy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    ::close(sock);
    return false;
  }
  Connection c;
  c.fd = sock;
  {
    std::lock_guard<std::mutex> lock(mu_);
    --pending_;
    ++live_;
    ++stats_.connections;
    open_.push_back(&c);
    if (stopping_) {
      c.told_to_go = true;
      --live_;
    }
  }
  t_connection = &c;
  auto set_state = [&](Connection::State s) {
    std::lock_guard<std::mutex> lock(mu_);
    c.state = s;
    c.since = Clock::now();
  };
  bool ok = false;
  for (int left = limits_.max_requests_per_connection; left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
    auto told_to_go = [&] {
      std::lock_guard<std::mutex> lock(mu_);
      return c.told_to_go;
    };
    if (told_to_go()) break;
    bool idle_expired = false;
    if (c.pos == c.end && !wait_for(sock, POLLIN, after(limits_.idle_timeout_s), &idle_expired)) break;
    if (told_to_go()) break;
    set_state(Connection::State::kReading);
    DeadlineStream strm(c, after(limits_.request_deadline_s), limits_.response_deadline_s);
    bool closed = false;
    ok = process_request(strm, /*close_connection=*/left == 1, closed, nullptr);
    if (strm.expired()) {  // what is left of the request is unread: the framing is lost
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.deadline_expired;
      break;
    }
    if (!ok || closed || c.close_after) break;
    set_state(Connection::State::kIdle);
  }
  t_connection = nullptr;
  if (c.close_after) linger(sock);
  {
    std::lock_guard<std::mutex> lock(mu_);
    open_.remove(&c);
    if (!c.told_to_go) --live_;
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace trident::monitor
