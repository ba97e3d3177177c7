// Status and StatusOr<T>: the result of operations whose failure is expected and must be
// handled by the caller (file I/O, parsing user files, checkpoints), as in leveldb/absl.
// Programming errors and invalid arguments throw trident::Error instead (core/check.h).
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "core/check.h"

namespace trident {

class [[nodiscard]] Status {
 public:
  static Status ok() { return Status(); }
  static Status error(ErrorKind kind, std::string message) {
    return Status(kind, std::move(message));
  }
  static Status io_error(std::string message) { return error(ErrorKind::kIO, std::move(message)); }
  static Status invalid(std::string message) {
    return error(ErrorKind::kValue, std::move(message));
  }

  bool is_ok() const { return !kind_.has_value(); }
  ErrorKind kind() const { return kind_.value_or(ErrorKind::kValue); }
  const std::string& message() const { return message_; }
  std::string to_string() const {
    return is_ok() ? "OK" : std::string(error_kind_name(*kind_)) + ": " + message_;
  }
  // Turns a failed status into an exception, for callers that cannot recover.
  void throw_if_error() const {
    if (!is_ok()) throw Error(*kind_, message_, nullptr, 0);
  }

 private:
  Status() = default;
  Status(ErrorKind kind, std::string message) : kind_(kind), message_(std::move(message)) {}
  std::optional<ErrorKind> kind_;
  std::string message_;
};

template <class T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)), status_(Status::ok()) {}  // NOLINT
  StatusOr(Status status) : status_(std::move(status)) {                  // NOLINT
    TRI_ASSERT(!status_.is_ok(), "StatusOr constructed from an OK status without a value.");
  }
  bool is_ok() const { return status_.is_ok(); }
  const Status& status() const { return status_; }
  T& value() & {
    status_.throw_if_error();
    return *value_;
  }
  T&& value() && {
    status_.throw_if_error();
    return std::move(*value_);
  }
  const T& value() const& {
    status_.throw_if_error();
    return *value_;
  }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace trident
