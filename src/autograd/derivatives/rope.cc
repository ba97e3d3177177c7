// Rotary position embedding: a rotation per (token, pair), so its backward is the inverse
// rotation of the gradient, and nothing is saved.
#include "autograd/functions/rope.h"

#include "autograd/record.h"
#include "ops/rope.h"

namespace trident {
using namespace autograd;

TRI_REGISTER_OP(kRope, "rope");

Tensor rope(const Tensor& x, const RopeParams& params, int64_t pos0) {
  TRI_PROFILE_OP(kRope);
  Tensor out = ops::rope(x, params, pos0);
  if (needs_grad({x}))
    record(kRope, {x}, {out}, [params, pos0](const BackwardContext& c) {
      // out = R x with R orthogonal:  dx = R^T dout = R^-1 dout
      return GradList{ops::rope(c.grad(), params, pos0, /*inverse=*/true)};
    });
  return out;
}

Tensor rope(const Tensor& x, const RopeParams& params, const Tensor& positions) {
  TRI_PROFILE_OP(kRope);
  Tensor out = ops::rope(x, params, positions);
  if (needs_grad({x}))
    record(kRope, {x}, {out}, [params, positions](const BackwardContext& c) {
      return GradList{ops::rope(c.grad(), params, positions, /*inverse=*/true)};
    });
  return out;
}

}  // namespace trident
