// attach_aux_loss(x, loss, loss_grad): x unchanged, with a node whose backward passes x's
// gradient through and starts `loss`'s backward from the constant loss_grad (every element of
// the gradient of `loss` is loss_grad). It adds an auxiliary loss (a mixture-of-experts
// router's load-balancing loss or z-loss) to the objective from inside the forward, on the
// activation it came from: the loss's gradient enters the backward wherever x's backward runs,
// on whichever pipeline stage, inside whichever checkpointed region's rerun (Megatron-Core's
// MoEAuxLossAutoScaler). The caller passes loss_grad = coefficient x the seed the main loss's
// backward starts from (1 / micro-batches, times fp16's loss scale); nn::AuxOutputs does.
//
// Its backward is not the derivative of its forward (the forward does not depend on `loss`):
// the op suite checks only its forward; tests/autograd/aux_loss_test.cc checks the gradients
// against finite differences of the objective it stands for.
//
// The node runs only when x's output receives a gradient: attach the loss to an activation
// the main loss depends on. Attach inside the region that computes `loss` (a checkpointed
// block's loss to the block's own activation), so the loss's graph is rerun with it.
//
// Backward rule: autograd/derivatives/aux_loss.cc.
#pragma once

#include "core/tensor.h"

namespace trident {

// Outside grad mode, or when neither x nor loss needs a gradient, returns x itself. `loss`
// must be floating (any shape: the gradient is loss_grad everywhere, as for sum(loss)).
Tensor attach_aux_loss(const Tensor& x, const Tensor& loss, double loss_grad);

}  // namespace trident
