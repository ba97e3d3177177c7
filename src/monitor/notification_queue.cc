#include "monitor/notification_queue.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "monitor/notify.h"
#include "monitor/notify_command.h"

namespace trident::monitor {
namespace {

// A command runs once (a pager CLI run twice pages twice) with the old 30 s bound.
constexpr double kCommandTimeoutS = 30.0;

const char* kind_name(NotificationQueue::Delivery::Kind k) {
  switch (k) {
    case NotificationQueue::Delivery::Kind::kWebhook: return "webhook";
    case NotificationQueue::Delivery::Kind::kEmail: return "e-mail";
    case NotificationQueue::Delivery::Kind::kCommand: return "command";
  }
  return "?";
}

}  // namespace

nlohmann::ordered_json run_identity(const std::string& out_dir, const std::string& job, int rank, int64_t step) {
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::absolute(out_dir, ec);
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char time[32];
  std::strftime(time, sizeof time, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return {{"out_dir", ec ? out_dir : dir.lexically_normal().string()},
          {"job", job},
          {"host", host_name()},
          {"rank", rank},
          {"step", step},
          {"time", time}};
}

NotificationQueue::NotificationQueue(const NotificationQueueOptions& options, Sender sender, Clock clock)
    : options_(options), sender_(sender ? std::move(sender) : Sender(&NotificationQueue::send_delivery)),
      clock_(clock ? std::move(clock) : Clock([] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
      })) {
  thread_ = std::thread([this] { run(); });
}

NotificationQueue::~NotificationQueue() { close(); }

double NotificationQueue::now() const { return clock_(); }

bool NotificationQueue::admit(const std::string& rule, int64_t* suppressed) {
  const double t = now();
  std::lock_guard<std::mutex> lock(mu_);
  Cooldown& c = cooldowns_[rule];
  if (c.ever_sent && t - c.last_sent < options_.cooldown_s) {
    ++c.suppressed;
    ++stats_.suppressed;
    return false;
  }
  if (suppressed != nullptr) *suppressed = c.suppressed;
  c.suppressed = 0;
  c.ever_sent = true;
  c.last_sent = t;
  return true;
}

bool NotificationQueue::post(const Notification& n) {
  std::vector<Delivery> ds;
  if (!n.webhook.empty()) ds.push_back({Delivery::Kind::kWebhook, n.rule, n.webhook, "", "", "", n.json});
  if (!n.email_to.empty())
    ds.push_back({Delivery::Kind::kEmail, n.rule, n.smtp_url, n.email_from, n.email_to, n.subject, n.text});
  if (!n.command.empty()) ds.push_back({Delivery::Kind::kCommand, n.rule, n.command, "", "", "", n.json + "\n"});
  bool all = true;
  bool say = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Delivery& d : ds) {
      if (closing_ || queue_.size() >= options_.capacity) {
        ++stats_.dropped;
        all = false;
        say = say || (!dropping_ && !closing_);
        dropping_ = true;
        continue;
      }
      dropping_ = false;
      queue_.push_back(std::move(d));
    }
  }
  if (say)  // outside the lock; once per run of drops
    std::fprintf(stderr,
                 "alert '%s': notification queue full (%zu waiting: its endpoints are slow or down); dropping "
                 "notifications until it drains\n",
                 n.rule.c_str(), options_.capacity);
  wake_.notify_one();
  return all;
}

void NotificationQueue::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return !queue_.empty() || closing_; });
    if (queue_.empty() || abort_) break;  // closing, and nothing (more) to send
    Delivery d = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    deliver(d);
    lock.lock();
    busy_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
  busy_ = false;
  idle_.notify_all();
}

void NotificationQueue::deliver(const Delivery& d) {
  const int attempts = d.kind == Delivery::Kind::kCommand ? 1 : std::max(1, options_.attempts);
  double backoff = options_.backoff_s;
  for (int a = 1;; ++a) {
    const Status s = sender_(d, options_, abort_);
    if (s.is_ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.sent;
      return;
    }
    if (a >= attempts || abort_) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.failed;
      }
      std::fprintf(stderr, "alert '%s': %s not sent after %d %s: %s\n", d.rule.c_str(), kind_name(d.kind), a,
                   a == 1 ? "try" : "tries", s.to_string().c_str());
      return;
    }
    std::unique_lock<std::mutex> lock(mu_);
    wake_.wait_for(lock, std::chrono::duration<double>(backoff), [&] { return abort_.load(); });
    backoff *= 2;
  }
}

void NotificationQueue::close() {
  std::call_once(closed_, [this] { close_once(); });  // a second caller waits for the first
}

void NotificationQueue::close_once() {
  std::unique_lock<std::mutex> lock(mu_);
  closing_ = true;
  wake_.notify_all();
  const bool drained = idle_.wait_for(lock, std::chrono::duration<double>(options_.shutdown_s),
                                      [&] { return queue_.empty() && !busy_; });
  size_t left = 0;
  if (!drained) {
    abort_ = true;
    left = queue_.size() + (busy_ ? 1 : 0);
    stats_.dropped += static_cast<int64_t>(queue_.size());
    queue_.clear();
  }
  wake_.notify_all();
  lock.unlock();
  if (left > 0)
    std::fprintf(stderr,
                 "notifications: %zu not sent when the run ended: their endpoints did not answer within %g s "
                 "(monitor.notify_timeout)\n",
                 left, options_.shutdown_s);
  thread_.join();
}

NotificationQueue::Stats NotificationQueue::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

Status NotificationQueue::send_delivery(const Delivery& d, const NotificationQueueOptions& options,
                                        const std::atomic<bool>& abort) {
  NotifySendOptions o;
  o.connect_timeout_s = std::min(options.connect_timeout_s, options.timeout_s);
  o.timeout_s = options.timeout_s;
  o.abort = &abort;
  switch (d.kind) {
    case Delivery::Kind::kWebhook: return post_webhook(d.target, d.body, o);
    case Delivery::Kind::kEmail: return send_email(d.target, d.from, d.to, d.subject, d.body, o);
    case Delivery::Kind::kCommand: return run_notify_command(d.target, d.body, std::max(kCommandTimeoutS, options.timeout_s), &abort);
  }
  return Status::invalid("unknown delivery kind");
}

}  // namespace trident::monitor
