// How a mixture-of-experts layer's rows reach its experts: the seam expert parallelism plugs
// into (parallel/expert_parallel.h), as tensor parallelism's styles plug into a linear layer.
// Without one, the layer holds every expert and runs them on its own rows. With one, this
// rank holds experts [first(), first() + count()) and the dispatch sends every expert's rows
// to the rank holding it and brings the outputs back.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/tensor.h"

namespace trident::moe {

// Runs this rank's experts on `rows` (R, C) sorted by local expert, local expert e's rows
// [offsets[e], offsets[e + 1]); returns their outputs (R, C) in the same order.
using LocalExperts = std::function<Tensor(const Tensor& rows, const std::vector<int64_t>& offsets)>;

class ExpertDispatch {
 public:
  virtual ~ExpertDispatch() = default;
  // The experts this rank holds.
  virtual int64_t first() const = 0;
  virtual int64_t count() const = 0;
  // xs (M, C): this rank's rows sorted by (global) expert, counts[e] of them for expert e.
  // Returns the experts' outputs for xs's rows, in xs's order. Collective over the ranks that
  // hold the layer's other experts: each calls it once per forward of the layer.
  virtual Tensor run(const Tensor& xs, const std::vector<int64_t>& counts, const LocalExperts& local) const = 0;
};

}  // namespace trident::moe
