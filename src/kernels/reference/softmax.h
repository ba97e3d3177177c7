// Reference softmax and log_softmax over one dim (negative dims count from the end), float64,
// naive: for every slice along `dim`, subtract the slice's max, exponentiate, sum, normalize.
//   softmax(x)_i     = exp(x_i - m) / sum_j exp(x_j - m)
//   log_softmax(x)_i = x_i - m - log(sum_j exp(x_j - m))
#pragma once

#include <cstdint>

#include "kernels/reference/array.h"

namespace trident::reference {

Array softmax(const Array& x, int64_t dim);
Array log_softmax(const Array& x, int64_t dim);

}  // namespace trident::reference
