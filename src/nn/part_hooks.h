// Part hooks: how code outside a model runs around the forward of the model's parts, the
// groups of parameters used together (PyTorch FSDP's "units": usually one per transformer
// block, plus a root for the rest). A model that supports them lists its parts and sends
// each part's forward through run_part(). ZeRO-3 (parallel/zero.h) uses them to gather a
// part's sharded parameters just before its forward, free them after, and mark the output so
// they are gathered again just before the part's backward. The model itself stays written
// for one device and never learns what the hooks do.
#pragma once

#include <functional>

#include "core/tensor.h"

namespace trident::nn {

using PartForward = std::function<Tensor(const Tensor&)>;

class PartHooks {
 public:
  virtual ~PartHooks() = default;
  // Returns forward(x), the forward of part `part`, with what the hooks do around it.
  virtual Tensor run(size_t part, const PartForward& forward, const Tensor& x) = 0;
};

// forward(x) through `hooks` when there are any.
inline Tensor run_part(PartHooks* hooks, size_t part, const PartForward& forward, const Tensor& x) {
  return hooks != nullptr ? hooks->run(part, forward, x) : forward(x);
}

}  // namespace trident::nn
