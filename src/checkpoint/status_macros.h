// Propagating a failed Status out of a function, as absl's RETURN_IF_ERROR / ASSIGN_OR_RETURN.
// Private to src/checkpoint: core/status.h has no such macros yet; if it gains them, these go.
#pragma once

#include "core/status.h"

#define CKPT_CONCAT_INNER(a, b) a##b
#define CKPT_CONCAT(a, b) CKPT_CONCAT_INNER(a, b)

// Evaluates `expr` (a Status) and returns it from the enclosing function if it failed.
#define CKPT_RETURN_IF_ERROR(expr)                  \
  do {                                              \
    ::trident::Status ckpt_status_ = (expr);        \
    if (!ckpt_status_.is_ok()) return ckpt_status_; \
  } while (0)

// Evaluates `expr` (a StatusOr<T>); returns its Status on failure, else moves the value into
// `lhs` (a declaration such as `auto x` or an existing variable).
#define CKPT_ASSIGN_OR_RETURN(lhs, expr) \
  CKPT_ASSIGN_OR_RETURN_IMPL(CKPT_CONCAT(ckpt_statusor_, __LINE__), lhs, expr)
#define CKPT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.is_ok()) return tmp.status();           \
  lhs = std::move(tmp).value()
