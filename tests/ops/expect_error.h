// expect_error: the check the front-end tests (tests/ops/*_test.cc) make of an error
// message. Runs a callable that must throw a trident::Error whose message names the op and
// the offending values; records a test failure otherwise.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/check.h"

namespace trident {

// Runs fn, expecting a trident::Error whose message contains every one of `parts`.
inline void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    for (const std::string& part : parts)
      EXPECT_NE(e.message().find(part), std::string::npos)
          << "message \"" << e.message() << "\" does not contain \"" << part << "\"";
  }
}

// The same, and the error must be of `kind`.
inline void expect_error(const std::function<void()>& fn, ErrorKind kind,
                         const std::vector<std::string>& parts) {
  expect_error(
      [&] {
        try {
          fn();
        } catch (const Error& e) {
          EXPECT_EQ(e.kind(), kind) << e.message();
          throw;
        }
      },
      parts);
}

}  // namespace trident
