// The state of an activation-checkpointed region (autograd/functions/activation_checkpoint.h) that ops
// inside it consult. A region runs twice: once in the forward without recording, once in the
// backward with recording. Under a selective policy the matrix products keep the outputs of
// the first run and hand them back in the second instead of recomputing them: the products
// are most of the FLOPs, and the cheap ops around them (norms, attention, GELU) hold most of
// the memory.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "core/tensor.h"

namespace trident::autograd {

// What a checkpointed region recomputes in the backward.
enum class RecomputePolicy {
  kEverything,      // keep only the region's inputs ("full")
  kAllButMatmuls,   // also keep every matmul/linear output ("selective")
};

struct RecomputeRegion {
  RecomputePolicy policy = RecomputePolicy::kEverything;
  bool replaying = false;     // false: the first (forward) run; true: the backward's rerun
  std::vector<Tensor> kept;   // outputs kept by the first run, in program order
  size_t next_kept = 0;       // the rerun's position in `kept`
};

// Makes `region` the innermost active region on this thread for its lifetime.
class RecomputeScope {
 public:
  explicit RecomputeScope(RecomputeRegion* region);
  ~RecomputeScope();
  RecomputeScope(const RecomputeScope&) = delete;
  RecomputeScope& operator=(const RecomputeScope&) = delete;

 private:
  RecomputeRegion* previous_;
};

// Whether a checkpointed region is running on this thread (a region nested in another one
// is folded into it).
bool in_recompute_region();
// Whether this thread is inside a checkpointed region's rerun (the backward's recomputation).
bool rerunning_recompute_region();

// For the matrix products: compute() outside a selective region; inside one, compute() and
// keep the result on the first run, and the kept result (no computation) on the rerun.
Tensor kept_or_computed(const std::function<Tensor()>& compute);

}  // namespace trident::autograd
