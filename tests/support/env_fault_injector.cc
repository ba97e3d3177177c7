#include "support/env_fault_injector.h"

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "comm/flight_recorder.h"
#include "core/check.h"

namespace trident::testing {
namespace {

int64_t parse_int(const char* var, const std::string& whole, const std::string& text, const char* form) {
  size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  TRI_CHECK(used == text.size() && !text.empty() && v >= 0, var, " = \"", whole, "\" (environment): expected ", form);
  return v;
}

struct Sleep {
  int64_t at = 0;
  double seconds = 0.0;
  int rank = -1;
};

// "AT:SECONDS[:RANK]".
Sleep parse_sleep(const char* var, const std::string& s, const char* form) {
  const size_t a = s.find(':');
  TRI_CHECK(a != std::string::npos, var, " = \"", s, "\" (environment): expected ", form);
  const size_t b = s.find(':', a + 1);
  Sleep sleep;
  sleep.at = parse_int(var, s, s.substr(0, a), form);
  sleep.seconds = static_cast<double>(
      parse_int(var, s, s.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1), form));
  if (b != std::string::npos) sleep.rank = static_cast<int>(parse_int(var, s, s.substr(b + 1), form));
  return sleep;
}

}  // namespace

std::shared_ptr<EnvFaultInjector> EnvFaultInjector::from_env() {
  auto h = std::make_shared<EnvFaultInjector>();
  bool any = false;
  if (const char* v = std::getenv("TRIDENT_TEST_NAN_BATCH"); v != nullptr && *v != '\0') {
    h->nan_batch_ = parse_int("TRIDENT_TEST_NAN_BATCH", v, v, "a sampler position, an integer >= 0");
    any = true;
  }
  if (const char* v = std::getenv("TRIDENT_TEST_SLEEP_BATCH"); v != nullptr && *v != '\0') {
    const Sleep sleep = parse_sleep("TRIDENT_TEST_SLEEP_BATCH", v, "POSITION:SECONDS[:RANK], integers >= 0");
    h->sleep_batch_ = sleep.at;
    h->sleep_s_ = sleep.seconds;
    h->sleep_rank_ = sleep.rank;
    any = true;
  }
  if (const char* v = std::getenv("TRIDENT_TEST_SLEEP_COLLECTIVE"); v != nullptr && *v != '\0') {
    const Sleep sleep = parse_sleep("TRIDENT_TEST_SLEEP_COLLECTIVE", v, "SEQUENCE:SECONDS[:RANK], integers >= 0");
    h->sleep_collective_ = sleep.at;
    h->sleep_collective_s_ = sleep.seconds;
    h->sleep_collective_rank_ = sleep.rank;
    any = true;
  }
  return any ? h : nullptr;
}

bool EnvFaultInjector::before_batch(int64_t position, int rank) {
  if (sleep_batch_ && *sleep_batch_ == position && (sleep_rank_ < 0 || sleep_rank_ == rank))
    std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s_));
  return nan_batch_ && *nan_batch_ == position;
}

void EnvFaultInjector::at_start(int rank) {
  // The world is communicator 0 (Note [Reading a flight record] in comm/flight_recorder.h).
  if (sleep_collective_ && (sleep_collective_rank_ < 0 || sleep_collective_rank_ == rank))
    comm::flight_recorder().sleep_inside(0, *sleep_collective_, sleep_collective_s_);
}

}  // namespace trident::testing
