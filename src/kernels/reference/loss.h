// Reference cross-entropy in float64, as the definition reads:
//   loss_r = log(sum_j exp(logits[r, j])) - logits[r, targets[r]]
// summed over rows whose target is not ignore_index, then divided by their count when
// `mean` (0/0 = NaN when every row is ignored, as in PyTorch). logits (..., V); targets
// with the leading shape (...) holding integer class ids as doubles. Returns a 0-dim array.
// No validation beyond what the loops need: the op front end validates targets.
#pragma once

#include <cstdint>

#include "kernels/reference/array.h"

namespace trident::reference {

Array cross_entropy(const Array& logits, const Array& targets, int64_t ignore_index, bool mean);

}  // namespace trident::reference
