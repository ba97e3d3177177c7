// Profiling an op's forward (core/profiler.h): TRI_PROFILE_OP(kLinear) as the first line of a
// differentiable function opens a scope named by the op's registered name for the rest of the
// function, in phase forward, or recompute while activation checkpointing reruns the forward
// inside the backward (autograd/recompute.h). It counts under no_grad too (evaluation).
// Backward nodes are timed by the engine (autograd/engine.cc), under the same names.
#pragma once

#include <optional>

#include "autograd/op_registry.h"
#include "autograd/recompute.h"
#include "core/profiler.h"

namespace trident::autograd {

class OpScope {
 public:
  explicit OpScope(const OpDef& op) {
    if (profiler::enabled()) [[unlikely]]
      scope_.emplace(op.name, rerunning_recompute_region() ? profiler::Phase::kRecompute : profiler::Phase::kForward);
  }

 private:
  std::optional<profiler::ProfileScope> scope_;
};

}  // namespace trident::autograd

#define TRI_PROFILE_OP(op) const ::trident::autograd::OpScope tri_op_scope_(op)
