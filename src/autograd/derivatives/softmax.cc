// Differentiable softmax and log_softmax. Both save only their output: the backward
// formulas need y, not x.
#include "autograd/functions/softmax.h"

#include "autograd/record.h"
#include "ops/softmax.h"

namespace trident {
using namespace autograd;

TRI_REGISTER_OP(kSoftmax, "softmax");
TRI_REGISTER_OP(kLogSoftmax, "log_softmax");

Tensor softmax(const Tensor& x, int64_t dim) {
  TRI_PROFILE_OP(kSoftmax);
  Tensor out = ops::softmax(x, dim);
  if (needs_grad({x}))
    record(kSoftmax, {x}, {out}, [sy = SavedTensor::output(out), dim](const BackwardContext& c) {
      // dx = y * (g - sum(g * y))  over dim
      return GradList{ops::softmax_backward(c.grad(), sy.get(), dim)};
    });
  return out;
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  TRI_PROFILE_OP(kLogSoftmax);
  Tensor out = ops::log_softmax(x, dim);
  if (needs_grad({x}))
    record(kLogSoftmax, {x}, {out}, [sy = SavedTensor::output(out), dim](const BackwardContext& c) {
      // dx = g - exp(y) * sum(g)  over dim
      return GradList{ops::log_softmax_backward(c.grad(), sy.get(), dim)};
    });
  return out;
}

}  // namespace trident
