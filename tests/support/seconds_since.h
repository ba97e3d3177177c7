// Seconds on the steady clock since `t`: how long a call or a wait in a test took.
#pragma once

#include <chrono>

namespace trident::testing {

inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace trident::testing
