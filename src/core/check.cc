#include "core/check.h"

namespace trident {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kValue: return "ValueError";
    case ErrorKind::kIndex: return "IndexError";
    case ErrorKind::kType: return "TypeError";
    case ErrorKind::kNotImplemented: return "NotImplementedError";
    case ErrorKind::kInternal: return "InternalError";
    case ErrorKind::kIO: return "IOError";
    case ErrorKind::kDistributed: return "DistributedError";
  }
  return "Error";
}

static std::string format_what(ErrorKind kind, const std::string& message, const char* file,
                               int line) {
  std::string head = std::string(error_kind_name(kind)) + ": " + message;
  if (file == nullptr) return head;
  std::string where = file;
  // Show paths relative to the source tree, not the build machine's absolute path.
  if (auto pos = where.rfind("/src/"); pos != std::string::npos) where = where.substr(pos + 1);
  return head + " (" + where + ":" + std::to_string(line) + ")";
}

Error::Error(ErrorKind kind, std::string message, const char* file, int line)
    : std::runtime_error(format_what(kind, message, file, line)),
      kind_(kind),
      message_(std::move(message)) {}

namespace detail {
void throw_error(ErrorKind kind, const char* file, int line, const std::string& msg) {
  throw Error(kind, msg, file, line);
}
}  // namespace detail

}  // namespace trident
