// The message of the exception `f` throws, or "" when it returns: for tests of error texts.
#pragma once

#include <exception>
#include <functional>
#include <string>

namespace trident::testing {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace trident::testing
