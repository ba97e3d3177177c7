// The backward hook: identity forward; backward calls the hook, then passes the gradient on.
#include "autograd/functions/backward_hook.h"

#include "autograd/record.h"

namespace trident {
using namespace autograd;

TRI_REGISTER_OP(kBackwardHook, "backward_hook");

Tensor backward_hook(const Tensor& x, std::function<void()> fn) {
  TRI_PROFILE_OP(kBackwardHook);
  if (!needs_grad({x})) return x;
  Tensor out = detach(x);  // the same values; a tensor of its own for the node to produce
  record(kBackwardHook, {x}, {out}, [fn = std::move(fn)](const BackwardContext& c) {
    fn();
    return GradList{c.grad()};
  });
  return out;
}

}  // namespace trident
