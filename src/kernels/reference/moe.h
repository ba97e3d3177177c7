// Reference mixture-of-experts pieces, by explicit loops over rows (autograd/functions/moe.h).
// Gradients are checked against finite differences of these forwards.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/reference/array.h"

namespace trident::reference {

// x (M, in); ws[e] (out, in); group e the rows [offsets[e], offsets[e + 1]) -> (M, out).
Array grouped_linear(const Array& x, const std::vector<Array>& ws, const std::vector<int64_t>& offsets);
// src (M, C), index (M) with values in [0, rows) -> (rows, C), out[index[m]] += src[m].
Array scatter_add_rows(const Array& src, const Array& index, int64_t rows);

}  // namespace trident::reference
