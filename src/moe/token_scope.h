// Which tokens a mixture-of-experts layer routes: the seam for a layout that hands the layer
// part of each sequence (sequence parallelism: parallel/tp_styles.cc's style for SparseMoe).
// The router's losses are statistics of a whole micro-batch (Note [The load-balancing loss]),
// so the layer runs on all of its tokens: enter() makes the whole micro-batch from this rank's
// part, leave() takes this rank's part of the layer's output. Without a scope the layer's input
// is the whole micro-batch already.
#pragma once

#include "core/tensor.h"

namespace trident::moe {

class TokenScope {
 public:
  virtual ~TokenScope() = default;
  virtual Tensor enter(const Tensor& x) const = 0;
  virtual Tensor leave(const Tensor& y) const = 0;
};

}  // namespace trident::moe
