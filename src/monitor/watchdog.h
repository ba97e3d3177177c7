// The hang rule's watchdog (`[[alerts]]` condition "hang"): a thread that fires when no step
// has finished for `timeout` seconds while the run is running (not paused). It runs on every
// rank, because a hung rank cannot reach the step boundary where the other rules' actions
// travel (Note [Control at step boundaries] in train/trainer.cc): each rank judges its own
// progress and acts alone (Note [Hang actions] in train/run_monitor.cc).
//
// Thread-safe: step_done() and set_armed() may be called from any thread; the callback runs
// on the watchdog's thread, once per stretch without progress (a finished step re-arms it).
// Destruction stops and joins the thread (at most one poll interval, 100 ms, or the
// callback's duration).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace trident::monitor {

class Watchdog {
 public:
  // `on_hang(seconds since the last finished step)`.
  Watchdog(double timeout_s, std::function<void(double)> on_hang);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void step_done();
  // Disarmed while paused (a pause is no hang); arming restarts the clock.
  void set_armed(bool armed);

 private:
  void loop();
  using Clock = std::chrono::steady_clock;
  const std::chrono::duration<double> timeout_;
  std::function<void(double)> on_hang_;
  std::mutex mu_;
  std::condition_variable cv_;
  Clock::time_point last_ = Clock::now();
  bool armed_ = true, fired_ = false, stop_ = false;
  std::thread thread_;
};

}  // namespace trident::monitor
