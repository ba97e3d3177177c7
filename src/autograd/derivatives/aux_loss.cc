// attach_aux_loss: identity forward on x; backward passes x's gradient through and gives the
// auxiliary loss the constant gradient loss_grad.
#include "autograd/functions/aux_loss.h"

#include <cmath>

#include "autograd/record.h"
#include "core/factory.h"

namespace trident {
using namespace autograd;

TRI_REGISTER_OP(kAttachAuxLoss, "attach_aux_loss");

Tensor attach_aux_loss(const Tensor& x, const Tensor& loss, double loss_grad) {
  TRI_PROFILE_OP(kAttachAuxLoss);
  TRI_CHECK(is_floating(x.dtype()) && is_floating(loss.dtype()),
            "attach_aux_loss: expected a floating activation and loss, got ", x.dtype(), " and ", loss.dtype());
  if (!needs_grad({x, loss})) return x;
  Tensor out = detach(x);  // the same values; a tensor of its own for the node to produce
  record(kAttachAuxLoss, {x, loss}, {out}, [meta = TensorMeta::of(loss), loss_grad](const BackwardContext& c) {
    GradList grads(2);
    if (c.needs(0)) grads[0] = c.grad();
    if (c.needs(1)) grads[1] = full(meta.shape, loss_grad, meta.dtype, meta.device);
    return grads;
  });
  return out;
}

}  // namespace trident
