#include "autograd/op_registry.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>

namespace trident::autograd {

namespace {
struct Registry {
  std::mutex mu;
  std::deque<OpDef> ops;  // deque: references stay valid as ops are added
};
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}
}  // namespace

const OpDef& register_op(const char* name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const OpDef& op : r.ops) {
    if (std::strcmp(op.name, name) == 0) {
      // Runs during static initialization, before main can catch anything.
      std::fprintf(stderr, "trident: op '%s' registered twice; this is a trident bug\n", name);
      std::abort();
    }
  }
  r.ops.push_back(OpDef{name, static_cast<int>(r.ops.size())});
  return r.ops.back();
}

std::vector<std::string> registered_ops() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const OpDef& op : r.ops) names.emplace_back(op.name);
  return names;
}

}  // namespace trident::autograd
