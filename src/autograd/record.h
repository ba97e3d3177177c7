// Recording an operation into the autograd graph. Every differentiable op in
// autograd/derivatives/ follows the same shape:
//
//   TRI_REGISTER_OP(kMul, "mul");
//   Tensor mul(const Tensor& a, const Tensor& b) {
//     TRI_PROFILE_OP(kMul);                             // profiles the forward (autograd/op_scope.h)
//     Tensor out = ops::mul(a, b);                      // forward: no autograd inside ops
//     if (needs_grad({a, b}))
//       record(kMul, {a, b}, {out}, [sa = SavedTensor(a), sb = SavedTensor(b)](const BackwardContext& c) {
//         return GradList{c.needs(0) ? ... : std::nullopt, ...};   // the backward rule
//       });
//     return out;
//   }
#pragma once

#include <optional>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/op_scope.h"

namespace trident::autograd {

using OptionalTensors = std::vector<std::optional<Tensor>>;

// True when grad mode is on and any present input requires a gradient.
bool needs_grad(const OptionalTensors& inputs);

// Makes `outputs` results of a new node of `op` whose inputs are `inputs` (absent inputs and
// inputs that need no gradient get empty edges). Call only when needs_grad(inputs).
void record(const OpDef& op, const OptionalTensors& inputs, const std::vector<Tensor>& outputs,
            BackwardFn backward);

}  // namespace trident::autograd
