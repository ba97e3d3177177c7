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

}  // namespace

TestHooks TestHooks::from_env() {
  TestHooks h;
  if (const char* v = std::getenv("TRIDENT_TEST_NAN_BATCH"); v != nullptr && *v != '\0')
    h.nan_batch = parse_int("TRIDENT_TEST_NAN_BATCH", v, v, "a sampler position, an integer >= 0");
  if (const char* v = std::getenv("TRIDENT_TEST_SLEEP_BATCH"); v != nullptr && *v != '\0') {
    const char* form = "POSITION:SECONDS[:RANK], integers >= 0";
    const std::string s = v;
    const size_t a = s.find(':');
    TRI_CHECK(a != std::string::npos, "TRIDENT_TEST_SLEEP_BATCH = \"", s, "\" (environment): expected ", form);
    const size_t b = s.find(':', a + 1);
    h.sleep_batch = parse_int("TRIDENT_TEST_SLEEP_BATCH", s, s.substr(0, a), form);
    h.sleep_s = static_cast<double>(
        parse_int("TRIDENT_TEST_SLEEP_BATCH", s, s.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1), form));
    if (b != std::string::npos)
      h.sleep_rank = static_cast<int>(parse_int("TRIDENT_TEST_SLEEP_BATCH", s, s.substr(b + 1), form));
  }
  return h;
}

}  // namespace trident::train
