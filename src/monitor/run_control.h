// Run control between the HTTP server's thread (or an alert) and the training loop: requests
// to pause, resume, checkpoint or stop, and the run's status for GET /status.
//
// Requests are bits that accumulate until the training loop takes them at a step boundary
// (take_requests); only rank 0's RunControl is written to, and the trainer shares its word
// with the other ranks there (Note [Control at step boundaries] in train/trainer.cc).
//
// Thread-safe: every member may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

namespace trident::monitor {

enum ControlBits : uint32_t {
  kControlPause = 1,
  kControlResume = 2,
  kControlCheckpoint = 4,
  kControlStop = 8,
  kControlRollback = 16,  // rollback_and_skip (alerts only; no HTTP request sets it)
  kControlStopByRule = 32,  // with kControlStop: an alert rule decided it (exit 79, not 75)
};
// The bit of "pause", "resume", "checkpoint" or "stop" (0 for anything else).
uint32_t control_bit(const std::string& action);

// What GET /status reports.
struct RunStatus {
  std::string state = "starting";  // starting, running, paused, stopping, finished
  int64_t step = 0, steps = 0;
  std::optional<double> loss, val_loss;
  std::optional<double> eta_s;     // seconds to the last step at the recent pace
  std::string reason;              // why paused or stopping ("plateau: ...", "POST /pause")
};

class RunControl {
 public:
  // Adds request bits (and why, for /status) and wakes a waiting wait_for_request().
  void request(uint32_t bits, const std::string& reason);
  // Takes (and clears) the requests so far, and the reason given last.
  uint32_t take_requests(std::string* reason = nullptr);
  // Blocks until a request is pending or `timeout` passes; whether one is pending.
  bool wait_for_request(std::chrono::milliseconds timeout);

  void set_status(const RunStatus& status);
  RunStatus status() const;
  // The status as a JSON object.
  std::string status_json() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint32_t pending_ = 0;
  std::string reason_;
  RunStatus status_;
};

}  // namespace trident::monitor
