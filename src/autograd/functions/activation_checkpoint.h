// Activation checkpointing (torch.utils.checkpoint): trade compute for memory.
//
// activation_checkpoint(fn, inputs, policy, rng) returns fn(inputs), computed without recording, so
// none of fn's intermediate tensors stay alive; the node it records keeps only `inputs` (and,
// under RecomputePolicy::kAllButMatmuls, the outputs of fn's matrix products). Its backward
// reruns fn with recording on detached copies of the inputs and back-propagates the incoming
// gradient through the rerun: gradients of `inputs` flow on along the graph, and parameters
// that fn captures receive theirs directly in .grad (their grad-ready hooks fire then).
//
//   - fn must do the same work on every run; a region that draws random numbers (dropout)
//     passes its generator as `rng`, whose state is saved before the first run and restored
//     around the rerun, so the rerun draws the same masks and the generator ends up where the
//     uncheckpointed run would leave it.
//   - Outside grad mode it is just fn(inputs); so is a checkpoint inside another one's fn
//     (the outer region already reruns it).
//   - Results and gradients are bitwise those of the uncheckpointed fn: every kernel is
//     deterministic, and the rerun repeats the first run's operations in the same order.
//
// Backward rule: autograd/derivatives/activation_checkpoint.cc.
#pragma once

#include <functional>

#include "autograd/recompute.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace trident {

using autograd::RecomputePolicy;

Tensor activation_checkpoint(std::function<Tensor(const TensorList&)> fn, const TensorList& inputs,
                  RecomputePolicy policy = RecomputePolicy::kEverything, Generator* rng = nullptr);

}  // namespace trident
