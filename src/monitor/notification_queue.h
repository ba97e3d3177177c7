// Alert notifications (webhook, e-mail, command) sent from one background thread through a
// bounded queue, so that the training loop never waits on a notification's endpoint; and the
// cooldown that turns a rule's repeated firings into one notification and a count.
//
// Not here: what an event says (monitor/alert_rule.h), how each kind is sent
// (monitor/notify.h, monitor/notify_command.h), when rules fire (train/run_monitor.cc).
//
// Note [Notifications off the training thread]
// Q: Why a queue?
// A: Sending on the training thread cost every step up to both timeouts of every endpoint
//    of a firing rule (10 s each with a webhook and a mail server that accept and never
//    answer), and with several ranks, all of them waited at the next collective.
// Q: What does the training thread do now?
// A: post(): a few string copies under a mutex, and never a wait: a full queue drops the new
//    notification with one line on stderr (per run of drops; each is counted).
// Q: And the thread?
// A: Takes one delivery at a time (one rule's firing to one endpoint), tries it up to
//    `attempts` times, each bounded by connect and total timeouts, waiting `backoff_s`,
//    doubled each time, between tries, and logs a delivery that fails every try.
// Q: What happens at the end of the run?
// A: close() (also the destructor) gives what is queued or in flight `shutdown_s` seconds,
//    then aborts the transfer in flight (libcurl's progress callback, the command's process
//    group) and drops the rest with one line naming how many; it returns within about
//    shutdown_s + 1 s whatever the endpoints do.
// Q: And a rule that fires every few steps?
// A: admit() decides, per rule, whether this firing is notified: not within `cooldown_s` of
//    the rule's last notification; those firings are counted and the next notification
//    carries the count ("suppressed"). Every firing still goes to alerts.jsonl and the log.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace trident::monitor {

struct NotificationQueueOptions {
  size_t capacity = 64;            // deliveries waiting to be sent; beyond it new ones are dropped
  double cooldown_s = 300.0;       // a rule notifies at most once per this many seconds (0: every firing)
  double connect_timeout_s = 5.0;  // per try: TCP connect
  double timeout_s = 10.0;         // per try: the whole transfer (a command: its run time, at least 30 s)
  int attempts = 3;                // tries per delivery
  double backoff_s = 1.0;          // before the second try; doubled before each later one
  double shutdown_s = 5.0;         // close(): time left to what is queued or in flight
};

// One firing of one rule, to each of its endpoints (empty ones are skipped).
struct Notification {
  std::string rule;              // the rule's name: logs, and the cooldown's key
  std::string json;              // webhook body and command stdin (one line)
  std::string subject, text;     // the e-mail
  std::string webhook;           // URL
  std::string smtp_url, email_from, email_to;
  std::string command;           // shell command
};

// The run a notification is about: out_dir (absolute), job, host, rank, step and the time
// (UTC, ISO 8601), as the "run" object of every notified event.
nlohmann::ordered_json run_identity(const std::string& out_dir, const std::string& job, int rank, int64_t step);

class NotificationQueue {
 public:
  // One endpoint of one notification.
  struct Delivery {
    enum class Kind { kWebhook, kEmail, kCommand };
    Kind kind = Kind::kWebhook;
    std::string rule;
    std::string target;          // URL, SMTP URL or command
    std::string from, to, subject;
    std::string body;            // JSON, e-mail text, or stdin
  };
  // Sends one delivery once; must return soon after `abort` becomes true. Tests replace it.
  using Sender = std::function<Status(const Delivery&, const NotificationQueueOptions&, const std::atomic<bool>& abort)>;
  // Seconds on a monotonic clock (the cooldown's); tests replace it.
  using Clock = std::function<double()>;

  // Starts the sending thread. `sender` empty: libcurl and /bin/sh (send_delivery).
  explicit NotificationQueue(const NotificationQueueOptions& options, Sender sender = {}, Clock clock = {});
  ~NotificationQueue();  // close()
  NotificationQueue(const NotificationQueue&) = delete;
  NotificationQueue& operator=(const NotificationQueue&) = delete;

  // Whether this firing of `rule` is notified (see the cooldown above). When it is,
  // `suppressed` is set to the rule's firings not notified since its last notification.
  // Thread-safe, never waits.
  bool admit(const std::string& rule, int64_t* suppressed);

  // Queues one delivery per endpoint of `n`. Thread-safe, never waits. False when it did not
  // fit (dropped, counted, and said on stderr once per run of drops) or after close().
  bool post(const Notification& n);

  // Waits for what is queued, at most shutdown_s, then aborts and drops the rest; idempotent.
  void close();

  struct Stats {
    int64_t sent = 0;        // deliveries that succeeded
    int64_t failed = 0;      // deliveries that failed every try (or were aborted)
    int64_t dropped = 0;     // deliveries that found the queue full, or were left at close()
    int64_t suppressed = 0;  // firings not notified for the cooldown
  };
  Stats stats() const;

  // The default sender: post_webhook, send_email or run_notify_command with the options'
  // timeouts.
  static Status send_delivery(const Delivery& d, const NotificationQueueOptions& options, const std::atomic<bool>& abort);

 private:
  void run();
  void close_once();
  void deliver(const Delivery& d);
  double now() const;

  const NotificationQueueOptions options_;
  const Sender sender_;
  const Clock clock_;
  mutable std::mutex mu_;
  std::condition_variable wake_;    // the thread: work, or closing
  std::condition_variable idle_;    // close(): the queue ran empty
  std::deque<Delivery> queue_;
  bool busy_ = false;               // a delivery is being tried
  bool closing_ = false;
  std::once_flag closed_;
  bool dropping_ = false;           // the last post found the queue full (one line per run)
  std::atomic<bool> abort_{false};
  struct Cooldown {
    double last_sent = 0.0;
    bool ever_sent = false;
    int64_t suppressed = 0;
  };
  std::map<std::string, Cooldown> cooldowns_;
  Stats stats_;
  std::thread thread_;
};

}  // namespace trident::monitor
