#include "autograd/recompute.h"

#include "core/check.h"

namespace trident::autograd {
namespace {

thread_local RecomputeRegion* current_region = nullptr;

}  // namespace

RecomputeScope::RecomputeScope(RecomputeRegion* region) : previous_(current_region) { current_region = region; }

RecomputeScope::~RecomputeScope() { current_region = previous_; }

bool in_recompute_region() { return current_region != nullptr; }

bool rerunning_recompute_region() { return current_region != nullptr && current_region->replaying; }

Tensor kept_or_computed(const std::function<Tensor()>& compute) {
  RecomputeRegion* r = current_region;
  if (r == nullptr || r->policy != RecomputePolicy::kAllButMatmuls) return compute();
  if (r->replaying) {
    TRI_CHECK(r->next_kept < r->kept.size(), "a checkpointed region's rerun made more matrix products (",
               r->next_kept + 1, ") than its first run (", r->kept.size(),
               "); the region's function must do the same work every time it runs");
    return r->kept[r->next_kept++];
  }
  Tensor out = compute();
  r->kept.push_back(out);
  return out;
}

}  // namespace trident::autograd
