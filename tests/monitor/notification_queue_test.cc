// The notification queue (monitor/notification_queue.h): the poster never waits, a full queue
// drops, the cooldown counts, retries back off, close() is bounded whatever the endpoints do;
// e-mails carry Date and Message-ID. Issue #47 item 2.
#include "monitor/notification_queue.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <thread>

#include "monitor/notify.h"
#include "support/seconds_since.h"

namespace trident::monitor {
namespace {

using Clock = std::chrono::steady_clock;
using trident::testing::seconds_since;

Notification webhook_note(const std::string& rule, const std::string& url = "http://unused/") {
  Notification n;
  n.rule = rule;
  n.json = R"({"rule":")" + rule + R"("})";
  n.webhook = url;
  return n;
}

// A sender that holds every delivery until released (or aborted), counting calls.
struct GatedSender {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int calls = 0;
  NotificationQueue::Sender fn() {
    return [this](const NotificationQueue::Delivery&, const NotificationQueueOptions&, const std::atomic<bool>& abort) {
      std::unique_lock<std::mutex> lock(mu);
      ++calls;
      cv.notify_all();
      while (!open && !abort) cv.wait_for(lock, std::chrono::milliseconds(10));
      return abort ? Status::io_error("aborted") : Status::ok();
    };
  }
  void wait_calls(int n) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return calls >= n; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
  }
};

TEST(NotificationQueue, AFullQueueDropsWithoutWaiting) {
  GatedSender gate;
  NotificationQueueOptions o;
  o.capacity = 2;
  NotificationQueue q(o, gate.fn());
  ASSERT_TRUE(q.post(webhook_note("a")));
  gate.wait_calls(1);  // the first is in flight, blocked
  EXPECT_TRUE(q.post(webhook_note("b")));
  EXPECT_TRUE(q.post(webhook_note("c")));
  EXPECT_FALSE(q.post(webhook_note("d")));  // 2 waiting: full
  EXPECT_FALSE(q.post(webhook_note("e")));
  EXPECT_EQ(q.stats().dropped, 2);
  gate.release();
  q.close();
  EXPECT_EQ(q.stats().sent, 3);
  EXPECT_EQ(q.stats().failed, 0);
  EXPECT_FALSE(q.post(webhook_note("f"))) << "closed";
}

TEST(NotificationQueue, CooldownCountsRepeatedFiringsAndTheNextOneSaysHowMany) {
  double now = 1000.0;
  NotificationQueueOptions o;
  o.cooldown_s = 100.0;
  NotificationQueue q(o, [](auto&&...) { return Status::ok(); }, [&] { return now; });
  int64_t suppressed = -1;
  EXPECT_TRUE(q.admit("spike", &suppressed));
  EXPECT_EQ(suppressed, 0);
  now += 10;
  EXPECT_FALSE(q.admit("spike", &suppressed));
  EXPECT_TRUE(q.admit("nan", &suppressed)) << "rules cool down apart";
  now += 50;
  EXPECT_FALSE(q.admit("spike", &suppressed));
  now += 41;  // 101 s after the first
  EXPECT_TRUE(q.admit("spike", &suppressed));
  EXPECT_EQ(suppressed, 2);
  now += 1;
  EXPECT_FALSE(q.admit("spike", &suppressed));
  EXPECT_EQ(q.stats().suppressed, 3);
  NotificationQueueOptions every = o;
  every.cooldown_s = 0;
  NotificationQueue all(every, [](auto&&...) { return Status::ok(); }, [&] { return now; });
  EXPECT_TRUE(all.admit("spike", &suppressed));
  EXPECT_TRUE(all.admit("spike", &suppressed));
}

TEST(NotificationQueue, RetriesWithBackoffThenGivesUp) {
  std::atomic<int> calls{0};
  NotificationQueueOptions o;
  o.attempts = 3;
  o.backoff_s = 0.01;
  {
    NotificationQueue q(o, [&](auto&&...) { return ++calls < 3 ? Status::io_error("down") : Status::ok(); });
    q.post(webhook_note("r"));
    q.close();
    EXPECT_EQ(calls, 3);
    EXPECT_EQ(q.stats().sent, 1);
  }
  calls = 0;
  NotificationQueue q(o, [&](auto&&...) { ++calls; return Status::io_error("down"); });
  Notification n = webhook_note("r");
  n.command = "true";  // a command is tried once
  q.post(n);
  q.close();
  EXPECT_EQ(calls, 3 + 1);
  EXPECT_EQ(q.stats().failed, 2);
}

TEST(NotificationQueue, CloseIsBoundedWhateverTheEndpointsDo) {
  GatedSender gate;  // never released: an endpoint that never answers
  NotificationQueueOptions o;
  o.shutdown_s = 0.3;
  NotificationQueue q(o, gate.fn());
  for (int i = 0; i < 5; ++i) q.post(webhook_note("r"));
  gate.wait_calls(1);
  const auto t = Clock::now();
  q.close();
  EXPECT_LT(seconds_since(t), 3.0) << "close() waited past its bound (0.3 s)";
  EXPECT_EQ(q.stats().sent, 0);
  EXPECT_EQ(q.stats().dropped + q.stats().failed, 5);
}

// A loopback socket that listens and never accepts: connections complete in the kernel and
// then hear nothing (a blackholed endpoint).
struct Blackhole {
  int fd = -1, port = 0;
  Blackhole() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd, 16);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~Blackhole() { ::close(fd); }
};

TEST(NotificationQueue, BlackholedWebhookAndMailServerNeverHoldThePoster) {
  Blackhole hole;
  NotificationQueueOptions o;
  o.timeout_s = 1.0;
  o.connect_timeout_s = 1.0;
  o.backoff_s = 0.1;
  o.shutdown_s = 0.5;
  NotificationQueue q(o);
  Notification n = webhook_note("r", "http://127.0.0.1:" + std::to_string(hole.port) + "/hook");
  n.smtp_url = "smtp://127.0.0.1:" + std::to_string(hole.port);
  n.email_to = "oncall@localhost";
  n.subject = "s";
  n.text = "t";
  const auto t = Clock::now();
  for (int i = 0; i < 10; ++i) q.post(n);
  EXPECT_LT(seconds_since(t), 0.5) << "posting waited on the endpoints";
  const auto c = Clock::now();
  q.close();
  EXPECT_LT(seconds_since(c), 4.0) << "close() bound 0.5 s, plus at most about 1 s for libcurl to see the abort";
  EXPECT_EQ(q.stats().sent, 0);
}

TEST(SendEmail, ABlackholedServerCostsItsTimeoutNotMore) {
  Blackhole hole;
  NotifySendOptions o;
  o.timeout_s = 1.0;
  const auto t = Clock::now();
  const Status s = send_email("smtp://127.0.0.1:" + std::to_string(hole.port), "a@b", "c@d", "s", "t", o);
  EXPECT_FALSE(s.is_ok());
  EXPECT_LT(seconds_since(t), 5.0);
  EXPECT_NE(s.to_string().find("within 1 s"), std::string::npos) << s.to_string();  // says its timeout
}

TEST(FormatEmail, HasDateAndMessageIdAndStuffsDots) {
  const auto when = std::chrono::system_clock::from_time_t(1795909207);  // Sat, 28 Nov 2026 23:40:07 UTC
  const std::string m = format_email("trident@localhost", "oncall@localhost", "[trident] job: alert",
                                     "line one\n.\nlast", when, "node7");
  EXPECT_NE(m.find("\r\nDate: Sat, 28 Nov 2026 23:40:07 +0000\r\n"), std::string::npos) << m;
  std::smatch id;
  ASSERT_TRUE(std::regex_search(m, id, std::regex("\r\nMessage-ID: <([^@>]+)@node7>\r\n"))) << m;
  const std::string again = format_email("trident@localhost", "oncall@localhost", "s", "b", when, "node7");
  EXPECT_EQ(again.find(id[1].str()), std::string::npos) << "two messages share a Message-ID";
  EXPECT_NE(m.find("\r\n\r\nline one\r\n..\r\nlast\r\n"), std::string::npos) << m;
  EXPECT_NE(m.find("To: <oncall@localhost>\r\n"), std::string::npos);
}

TEST(RunIdentity, NamesTheRun) {
  const nlohmann::ordered_json j = run_identity("runs/x", "pretrain", 0, 42);
  EXPECT_TRUE(j["out_dir"].get<std::string>().starts_with("/")) << j.dump();
  EXPECT_TRUE(j["out_dir"].get<std::string>().ends_with("/runs/x")) << j.dump();
  EXPECT_EQ(j["job"], "pretrain");
  EXPECT_EQ(j["host"], host_name());
  EXPECT_EQ(j["rank"], 0);
  EXPECT_EQ(j["step"], 42);
  EXPECT_TRUE(std::regex_match(j["time"].get<std::string>(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)"))) << j.dump();
}

}  // namespace
}  // namespace trident::monitor
