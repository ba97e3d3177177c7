// backward(): computes gradients of roots with respect to every leaf that requires one and
// accumulates them into the leaves' .grad.
//
// Note [Backward execution order]
// Why a priority queue on sequence numbers rather than a plain topological order? Running
// the most recently created ready node first replays the forward in exact reverse, so a
// layer's parameter gradients become final as early as possible; data parallelism relies on
// that to start all-reducing a bucket while backward continues (issue #5). AccumulateGrad
// nodes have the highest priority, so a leaf's grad-ready hooks fire as soon as its last
// contribution arrives. A node runs only after every incoming edge has delivered, so each
// leaf is accumulated exactly once per backward pass with its complete gradient.
#pragma once

#include <optional>
#include <vector>

#include "core/tensor.h"

namespace trident::autograd {

struct BackwardOptions {
  // Keep saved tensors so that backward can run through the same graph again.
  bool retain_graph = false;
};

// Backward from a scalar (one-element) tensor, with gradient 1.
void backward(const Tensor& root, BackwardOptions options = {});
// Backward from several roots with explicit gradients (same shape and dtype as each root;
// nullopt means ones, allowed only for one-element roots).
void backward(const std::vector<Tensor>& roots, const std::vector<std::optional<Tensor>>& grads,
              BackwardOptions options = {});

// Registers fn to run when `leaf`'s gradient is final in each backward pass (after it has
// been accumulated into leaf.grad()). The hook that data parallelism uses for overlap.
void register_grad_ready_hook(const Tensor& leaf, GradReadyHook fn);

}  // namespace trident::autograd
