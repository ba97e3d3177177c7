#include "monitor/watchdog.h"

namespace trident::monitor {

Watchdog::Watchdog(double timeout_s, std::function<void(double)> on_hang)
    : timeout_(timeout_s), on_hang_(std::move(on_hang)), thread_([this] { loop(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::step_done() {
  std::lock_guard<std::mutex> lock(mu_);
  last_ = Clock::now();
  fired_ = false;
}

void Watchdog::set_armed(bool armed) {
  std::lock_guard<std::mutex> lock(mu_);
  if (armed && !armed_) last_ = Clock::now();
  armed_ = armed;
}

void Watchdog::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    if (stop_ || !armed_ || fired_) continue;
    const std::chrono::duration<double> since = Clock::now() - last_;
    if (since < timeout_) continue;
    fired_ = true;
    lock.unlock();  // the callback may take a while (a notification) or end the process
    on_hang_(since.count());
    lock.lock();
  }
}

}  // namespace trident::monitor
