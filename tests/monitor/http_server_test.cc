#include "monitor/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "support/seconds_since.h"

namespace trident::monitor {
namespace {

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.gauge("trident_loss", "training loss").set(2.5);
    HttpServerOptions opt;
    opt.token = "s3cret";
    opt.max_body_bytes = 1024;
    opt.const_labels = {{"job", "t"}, {"rank", "0"}};
    auto s = HttpServer::start(opt, registry_, &control_);
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    server_ = std::move(s.value());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_connection_timeout(5);
    client_->set_read_timeout(5);
  }
  httplib::Result post(const std::string& path, const std::string& token, const std::string& body = "") {
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    return client_->Post(path.c_str(), h, body, "application/json");
  }
  Registry registry_;
  RunControl control_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(HttpServerTest, ServesMetricsAndStatus) {
  auto r = client_->Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("trident_loss{job=\"t\",rank=\"0\"} 2.5\n"), std::string::npos) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  RunStatus st;
  st.state = "running";
  st.step = 7;
  st.steps = 10;
  st.loss = 3.25;
  control_.set_status(st);
  r = client_->Get("/status");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "{\"state\":\"running\",\"step\":7,\"steps\":10,\"loss\":3.25,\"val_loss\":null,\"eta_s\":null,"
                     "\"reason\":\"\"}\n");
}

TEST_F(HttpServerTest, AuthorizedPostsBecomeRequests) {
  auto r = post("/pause", "s3cret", R"({"reason": "look at the loss"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 202) << r->body;
  r = post("/checkpoint", "s3cret");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 202);
  std::string reason;
  EXPECT_EQ(control_.take_requests(&reason), kControlPause | kControlCheckpoint);
  EXPECT_EQ(reason, "POST /checkpoint");
  EXPECT_EQ(control_.take_requests(), 0u);
  // The last word counts: resume after pause cancels it.
  ASSERT_TRUE(post("/pause", "s3cret"));
  ASSERT_TRUE(post("/resume", "s3cret"));
  EXPECT_EQ(control_.take_requests(), static_cast<uint32_t>(kControlResume));
}

TEST_F(HttpServerTest, BadRequestsChangeNothing) {
  struct Case {
    std::string method, path, token, body;
    int status;
  };
  const std::string huge(4096, 'x');
  const std::vector<Case> cases = {
      {"POST", "/pause", "", "", 401},                       // no token
      {"POST", "/stop", "wrong", "", 401},                   // wrong token
      {"POST", "/stop", "s3cre", "", 401},                   // a prefix of it
      {"POST", "/stop", "s3cret0", "", 401},                 // longer
      {"POST", "/pause", "s3cret", "{not json", 400},        // bad JSON
      {"POST", "/pause", "s3cret", "[1, 2]", 400},           // not an object
      {"POST", "/pause", "s3cret", R"({"reason": 5})", 400}, // reason not a string
      {"POST", "/pause", "s3cret", "{\"reason\": \"" + huge + "\"}", 413},  // huge body
      {"POST", "/pause", "", huge, 413},                     // huge and unauthenticated
      {"POST", "/explode", "s3cret", "", 404},               // unknown path
      {"GET", "/admin", "", "", 404},
      {"GET", "/pause", "", "", 405},                        // control needs POST
      {"POST", "/metrics", "s3cret", "", 405},
  };
  for (const Case& c : cases) {
    httplib::Result r = c.method == "GET" ? client_->Get(c.path.c_str()) : post(c.path, c.token, c.body);
    ASSERT_TRUE(r) << c.method << " " << c.path << ": no answer";
    EXPECT_EQ(r->status, c.status) << c.method << " " << c.path << " token '" << c.token << "' body "
                                   << c.body.substr(0, 40) << ": " << r->body;
    // Refusals say why, as JSON.
    if (r->status != 413) {
      EXPECT_NE(r->body.find("\"error\""), std::string::npos) << r->body;
    }
  }
  EXPECT_EQ(control_.take_requests(), 0u) << "a refused request reached the training loop";
}

// A path that is not UTF-8 is answered (the JSON error replaces the bad bytes) and the server
// stays up: it used to throw from the 404/405 answer on a server thread and end the process
// (fuzz/corpus/http_request_fuzz/crash_invalid_utf8_path_*).
TEST_F(HttpServerTest, PathsThatAreNotUtf8AreAnswered) {
  for (const char* path : {"/ab\xff", "/metrics\xff\xfe"}) {
    auto r = client_->Get(path);
    ASSERT_TRUE(r) << "no answer";
    EXPECT_EQ(r->status, 404);
    EXPECT_NE(r->body.find("\xef\xbf\xbd"), std::string::npos) << r->body;  // U+FFFD
  }
  auto r = post("/metrics\xff", "s3cret");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->status == 404 || r->status == 405) << r->status;
  r = client_->Get("/metrics");
  ASSERT_TRUE(r) << "the server is gone";
  EXPECT_EQ(r->status, 200);
}

TEST(HttpServer, WithoutATokenControlIsOff) {
  Registry registry;
  RunControl control;
  auto s = HttpServer::start({}, registry, &control);
  ASSERT_TRUE(s.is_ok());
  httplib::Client c("127.0.0.1", s.value()->port());
  c.set_read_timeout(5);
  auto r = c.Post("/stop", httplib::Headers{{"Authorization", "Bearer "}}, "", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_NE(r->body.find("TRIDENT_CONTROL_TOKEN"), std::string::npos);
  EXPECT_EQ(control.take_requests(), 0u);
}

TEST(HttpServer, OtherRanksRefuseControlAndNameRankZero) {
  Registry registry;
  HttpServerOptions opt;
  opt.token = "t";
  auto s = HttpServer::start(opt, registry, nullptr);
  ASSERT_TRUE(s.is_ok());
  httplib::Client c("127.0.0.1", s.value()->port());
  c.set_read_timeout(5);
  auto r = c.Post("/pause", httplib::Headers{{"Authorization", "Bearer t"}}, "", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 409);
  EXPECT_NE(r->body.find("rank 0"), std::string::npos);
}

TEST(HttpServer, BusyPortIsAnErrorNamingIt) {
  Registry registry;
  auto first = HttpServer::start({}, registry, nullptr);
  ASSERT_TRUE(first.is_ok());
  HttpServerOptions opt;
  opt.port = first.value()->port();
  auto second = HttpServer::start(opt, registry, nullptr);
  ASSERT_FALSE(second.is_ok());
  EXPECT_NE(second.status().to_string().find("127.0.0.1:" + std::to_string(opt.port)), std::string::npos)
      << second.status().to_string();
}

TEST(TokenMatches, ExactOnly) {
  EXPECT_TRUE(token_matches("abc", "abc"));
  EXPECT_FALSE(token_matches("abd", "abc"));
  EXPECT_FALSE(token_matches("", "abc"));
  EXPECT_FALSE(token_matches("", ""));  // no token configured: nothing matches
}

}  // namespace
}  // namespace trident::monitor

// Issue #47 item 4: a server that slow, silent or many clients cannot starve
// (monitor/http_server_bounded.h). Raw sockets, so a test can be a bad client.
namespace trident::monitor {
namespace {

using Clock = std::chrono::steady_clock;

using trident::testing::seconds_since;

// A connected loopback socket, or -1.
int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, const std::string& s) {
  return ::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
}

// What the server sends until it closes or `timeout_s` passes.
std::string read_answer(int fd, double timeout_s) {
  std::string out;
  const auto start = Clock::now();
  char buf[4096];
  while (seconds_since(start) < timeout_s) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Clients that send a request's line and then one header line every `every_s`, reconnecting
// when the server drops them (an attacker that keeps at it), until stopped.
class Tricklers {
 public:
  Tricklers(int port, int n, double every_s) {
    for (int i = 0; i < n; ++i)
      threads_.emplace_back([this, port, every_s] {
        while (!stop_) {
          const int fd = connect_to(port);
          if (fd < 0) break;
          bool ok = send_all(fd, "GET /metrics HTTP/1.1\r\n");
          for (int line = 0; ok && !stop_; ++line) {
            for (auto t = Clock::now(); !stop_ && seconds_since(t) < every_s;)
              std::this_thread::sleep_for(std::chrono::milliseconds(20));
            ok = send_all(fd, "X-Trickle-" + std::to_string(line) + ": 1\r\n");
          }
          ::close(fd);
        }
      });
  }
  ~Tricklers() {
    stop_ = true;
    for (std::thread& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

// Note [Timing bounds in these tests]: the bounds are the issue's (1 s) or generous ones on a
// loaded 2-core machine; a starved server misses them by seconds (its old behaviour: never
// answers while the clients go on), so the margin is wide on both sides.
TEST_F(HttpServerTest, ThirtyTwoTricklingClientsLeaveMetricsAnswering) {
  Tricklers tricklers(server_->port(), 32, 2.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // all of them in
  std::vector<double> took;
  for (int i = 0; i < 5; ++i) {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_connection_timeout(5);
    c.set_read_timeout(5);
    const auto t = Clock::now();
    auto r = c.Get("/metrics");
    took.push_back(seconds_since(t));
    ASSERT_TRUE(r) << "GET /metrics " << i << ": no answer in " << took.back() << " s";
    EXPECT_EQ(r->status, 200);
    httplib::Result st = c.Get("/status");
    ASSERT_TRUE(st) << "GET /status: no answer";
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  std::sort(took.begin(), took.end());
  EXPECT_LT(took[2], 1.0) << "median GET /metrics took " << took[2] << " s";
  EXPECT_LT(took.back(), 3.0) << "slowest GET /metrics took " << took.back() << " s";
  EXPECT_GT(server_->limit_stats().evicted, 0) << "32 clients, 16 connections: some were dropped";
  // Control too: an authorized POST goes through.
  httplib::Client c("127.0.0.1", server_->port());
  c.set_read_timeout(5);
  auto r = c.Post("/checkpoint", httplib::Headers{{"Authorization", "Bearer s3cret"}}, "", "application/json");
  ASSERT_TRUE(r) << "POST /checkpoint: no answer";
  EXPECT_EQ(r->status, 202);
}

TEST_F(HttpServerTest, PostWithoutContentLengthIs411AtOnce) {
  const int fd = connect_to(server_->port());
  ASSERT_GE(fd, 0);
  const auto t = Clock::now();
  ASSERT_TRUE(send_all(fd, "POST /pause HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret\r\n\r\n"));
  const std::string answer = read_answer(fd, 4.0);
  const double took = seconds_since(t);
  ::close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 411", 0), 0u) << answer;
  EXPECT_NE(answer.find("Content-Length"), std::string::npos) << answer;  // says what is missing
  EXPECT_LT(took, 2.0) << "the 411 came after " << took << " s (httplib waits for a body that never ends)";
  EXPECT_EQ(control_.take_requests(), 0u);
  // Chunked bodies are refused the same way (not bounded by max_body_bytes in httplib).
  auto r = client_->Post("/pause", httplib::Headers{{"Authorization", "Bearer s3cret"}},
                         [](size_t, httplib::DataSink& sink) {
                           sink.write("{}", 2);
                           sink.done();
                           return true;
                         },
                         "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 411);
  EXPECT_EQ(control_.take_requests(), 0u);
}

TEST_F(HttpServerTest, WrongMethodIs405WithAllow) {
  struct Case {
    std::string request, allow;
  };
  for (const Case& c : std::vector<Case>{
           {"PUT /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", "GET, HEAD"},
           {"DELETE /pause HTTP/1.1\r\nHost: x\r\n\r\n", "POST"},  // no Content-Length: 405, not 411
           {"POST /status HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", "GET, HEAD"},
           {"GET /stop HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "POST"},
       }) {
    const int fd = connect_to(server_->port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(send_all(fd, c.request));
    const std::string answer = read_answer(fd, 3.0);
    ::close(fd);
    EXPECT_EQ(answer.rfind("HTTP/1.1 405", 0), 0u) << c.request << "\n" << answer;
    EXPECT_NE(answer.find("Allow: " + c.allow + "\r\n"), std::string::npos) << c.request << "\n" << answer;
  }
  auto r = client_->Head("/metrics");  // HEAD where GET is served
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(control_.take_requests(), 0u);
}

TEST(HttpServerLimits, IdleConnectionsBeyondTheBoundDoNotBlockANewRequest) {
  Registry registry;
  registry.gauge("trident_loss", "training loss").set(1.0);
  HttpServerOptions opt;
  opt.limits.max_connections = 4;
  auto s = HttpServer::start(opt, registry, nullptr);
  ASSERT_TRUE(s.is_ok());
  const int port = s.value()->port();
  std::vector<int> idle;
  for (int i = 0; i < 40; ++i) {  // connect and never send a byte
    const int fd = connect_to(port);
    ASSERT_GE(fd, 0);
    idle.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(5);
  c.set_read_timeout(5);
  const auto t = Clock::now();
  auto r = c.Get("/metrics");
  const double took = seconds_since(t);
  ASSERT_TRUE(r) << "no answer in " << took << " s";
  EXPECT_EQ(r->status, 200);
  EXPECT_LT(took, 1.0) << "GET /metrics behind 40 idle connections took " << took << " s";
  EXPECT_LE(s.value()->limit_stats().open, 4);
  for (int fd : idle) ::close(fd);
}

TEST(HttpServerLimits, ATricklingRequestEndsAtItsDeadline) {
  Registry registry;
  HttpServerOptions opt;
  opt.limits.request_deadline_s = 1.0;
  auto s = HttpServer::start(opt, registry, nullptr);
  ASSERT_TRUE(s.is_ok());
  const int fd = connect_to(s.value()->port());
  ASSERT_GE(fd, 0);
  const auto t = Clock::now();
  ASSERT_TRUE(send_all(fd, "GET /metrics HTTP/1.1\r\n"));
  bool closed = false;
  for (int i = 0; i < 40 && !closed; ++i) {  // a header line every 0.1 s, for up to 4 s
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) {
      char buf[512];
      while (::recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
      }
      closed = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT) == 0 || !send_all(fd, "X: 1\r\n");
    } else {
      closed = !send_all(fd, "X: 1\r\n");
    }
  }
  const double took = seconds_since(t);
  ::close(fd);
  EXPECT_TRUE(closed) << "a request trickling for " << took << " s was still open (deadline 1 s)";
  EXPECT_LT(took, 3.5);
  EXPECT_GE(s.value()->limit_stats().deadline_expired, 1);
}

TEST(TokenMatches, LengthsAndPrefixes) {
  EXPECT_TRUE(token_matches("s3cret", "s3cret"));
  for (const char* wrong : {"s3cre", "s3cret0", "s3cres", "S3cret", "s3crets3cret", "x", "\0s3cret"})
    EXPECT_FALSE(token_matches(wrong, "s3cret")) << wrong;
  EXPECT_FALSE(token_matches(std::string("s3cret\0", 7), "s3cret"));
  EXPECT_FALSE(token_matches("s3cret", std::string("s3cret\0", 7)));
}

}  // namespace
}  // namespace trident::monitor
