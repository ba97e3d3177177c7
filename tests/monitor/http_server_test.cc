#include "monitor/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

namespace trident::monitor {
namespace {

class HttpServerTest : public testing::Test {
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
