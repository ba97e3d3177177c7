#include "train/test_hooks.h"

#include <cstdlib>
#include <string>

#include "core/check.h"

namespace trident::train {
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

TestHooks TestHooks::from_env() {
  TestHooks h;
  if (const char* v = std::getenv("TRIDENT_TEST_NAN_BATCH"); v != nullptr && *v != '\0')
    h.nan_batch = parse_int("TRIDENT_TEST_NAN_BATCH", v, v, "a sampler position, an integer >= 0");
  if (const char* v = std::getenv("TRIDENT_TEST_SLEEP_BATCH"); v != nullptr && *v != '\0') {
    const Sleep sleep = parse_sleep("TRIDENT_TEST_SLEEP_BATCH", v, "POSITION:SECONDS[:RANK], integers >= 0");
    h.sleep_batch = sleep.at;
    h.sleep_s = sleep.seconds;
    h.sleep_rank = sleep.rank;
  }
  if (const char* v = std::getenv("TRIDENT_TEST_SLEEP_COLLECTIVE"); v != nullptr && *v != '\0') {
    const Sleep sleep = parse_sleep("TRIDENT_TEST_SLEEP_COLLECTIVE", v, "SEQUENCE:SECONDS[:RANK], integers >= 0");
    h.sleep_collective = sleep.at;
    h.sleep_collective_s = sleep.seconds;
    h.sleep_collective_rank = sleep.rank;
  }
  return h;
}

}  // namespace trident::train
