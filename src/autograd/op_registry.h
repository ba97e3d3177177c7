// The registry of differentiable operations. Every operation that records autograd history
// must be registered (recording takes an OpDef, which only register_op hands out), and the
// op suite (tests/op_suite) fails for any registered op without a test entry. Together these
// make "an op without tests" a failing build rather than a review comment.
#pragma once

#include <string>
#include <vector>

namespace trident::autograd {

struct OpDef {
  const char* name;
  int id;
};

// Registers an op name at static-initialization time; duplicate names are a bug (aborts).
const OpDef& register_op(const char* name);
// All registered op names, in registration order.
std::vector<std::string> registered_ops();

}  // namespace trident::autograd

// Defines `var` as the OpDef of `name` in the current translation unit.
#define TRI_REGISTER_OP(var, name) \
  static const ::trident::autograd::OpDef& var = ::trident::autograd::register_op(name)
