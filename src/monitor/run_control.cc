#include "monitor/run_control.h"

#include <nlohmann/json.hpp>

namespace trident::monitor {

uint32_t control_bit(const std::string& action) {
  if (action == "pause") return kControlPause;
  if (action == "resume") return kControlResume;
  if (action == "checkpoint") return kControlCheckpoint;
  if (action == "stop") return kControlStop;
  return 0;
}

void RunControl::request(uint32_t bits, const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A resume cancels a pause not yet taken, and the other way round: the last word counts.
    if (bits & kControlResume) pending_ &= ~static_cast<uint32_t>(kControlPause);
    if (bits & kControlPause) pending_ &= ~static_cast<uint32_t>(kControlResume);
    pending_ |= bits;
    reason_ = reason;
  }
  cv_.notify_all();
}

uint32_t RunControl::take_requests(std::string* reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (reason != nullptr) *reason = reason_;
  return std::exchange(pending_, 0u);
}

bool RunControl::wait_for_request(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return pending_ != 0; });
}

void RunControl::set_status(const RunStatus& status) {
  std::lock_guard<std::mutex> lock(mu_);
  status_ = status;
}

RunStatus RunControl::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

std::string RunControl::status_json() const {
  const RunStatus s = status();
  nlohmann::ordered_json j = {{"state", s.state}, {"step", s.step}, {"steps", s.steps}};
  // JSON has no NaN: a value not measured (or not finite) is null.
  auto number = [](const std::optional<double>& v) -> nlohmann::json {
    return v && std::isfinite(*v) ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  j["loss"] = number(s.loss);
  j["val_loss"] = number(s.val_loss);
  j["eta_s"] = number(s.eta_s);
  j["reason"] = s.reason;
  return j.dump();
}

}  // namespace trident::monitor
