// backward_hook(x, fn): x unchanged, with a node whose backward first calls fn() and then
// passes the gradient through. It marks a point of the forward at which code outside the
// model acts when backward gets there: ZeRO-3 wraps a layer's output so that the layer's
// parameters are gathered again just before the layer's backward runs (PyTorch FSDP's
// pre-backward hook). The node runs once every use of x downstream has sent its gradient.
//
// Backward rule: autograd/derivatives/backward_hook.cc.
#pragma once

#include <functional>

#include "core/tensor.h"

namespace trident {

// Outside grad mode, or when x needs no gradient, returns x itself and fn never runs.
Tensor backward_hook(const Tensor& x, std::function<void()> fn);

}  // namespace trident
