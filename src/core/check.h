// Error reporting: two channels, as in PyTorch's c10.
//   TRI_CHECK*(cond, msg...)  a caller or user error: throws trident::Error naming the values.
//   TRI_ASSERT(cond, msg...)  an internal invariant: throws and says it is a trident bug.
//   TRI_DASSERT               like TRI_ASSERT, compiled out in release builds (hot paths).
// Expected I/O failures (missing file, corrupt checkpoint) use Status (core/status.h) instead.
// Library code never exits; only main() turns an Error into an exit code.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace trident {

enum class ErrorKind { kValue, kIndex, kType, kNotImplemented, kInternal, kIO, kDistributed };

const char* error_kind_name(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  // file may be null when there is no meaningful source location (a failed Status).
  Error(ErrorKind kind, std::string message, const char* file, int line);
  ErrorKind kind() const { return kind_; }
  // The message without the source location.
  const std::string& message() const { return message_; }

 private:
  ErrorKind kind_;
  std::string message_;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  ((os << args), ...);
  return os.str();
}
[[noreturn]] void throw_error(ErrorKind kind, const char* file, int line, const std::string& msg);
}  // namespace detail

}  // namespace trident

#define TRI_CHECK_KIND(kind, cond, ...)                                                      \
  do {                                                                                       \
    if (!(cond)) [[unlikely]]                                                                \
      ::trident::detail::throw_error(kind, __FILE__, __LINE__,                               \
                                     ::trident::detail::concat(__VA_ARGS__));                \
  } while (0)

#define TRI_CHECK(cond, ...) TRI_CHECK_KIND(::trident::ErrorKind::kValue, cond, __VA_ARGS__)
#define TRI_CHECK_INDEX(cond, ...) TRI_CHECK_KIND(::trident::ErrorKind::kIndex, cond, __VA_ARGS__)
#define TRI_CHECK_TYPE(cond, ...) TRI_CHECK_KIND(::trident::ErrorKind::kType, cond, __VA_ARGS__)
#define TRI_CHECK_NOT_IMPLEMENTED(cond, ...) \
  TRI_CHECK_KIND(::trident::ErrorKind::kNotImplemented, cond, __VA_ARGS__)
#define TRI_THROW(kind, ...) \
  ::trident::detail::throw_error(kind, __FILE__, __LINE__, ::trident::detail::concat(__VA_ARGS__))

#define TRI_ASSERT(cond, ...)                                                                \
  TRI_CHECK_KIND(::trident::ErrorKind::kInternal, cond, "Internal invariant failed: " #cond  \
                 ". ", ::trident::detail::concat(__VA_ARGS__),                                \
                 " This is a trident bug; please report it.")

#ifdef NDEBUG
#define TRI_DASSERT(cond, ...) ((void)0)
#else
#define TRI_DASSERT(cond, ...) TRI_ASSERT(cond, __VA_ARGS__)
#endif
