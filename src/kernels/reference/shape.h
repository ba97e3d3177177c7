// Reference shape operations, by explicit index mapping.
#pragma once

#include <vector>

#include "kernels/reference/array.h"

namespace trident::reference {

Array reshape(const Array& x, const Shape& shape);  // same data, new shape
Array permute(const Array& x, const std::vector<int64_t>& dims);
Array transpose(const Array& x, int64_t dim0, int64_t dim1);
Array narrow(const Array& x, int64_t dim, int64_t start, int64_t length);
Array expand(const Array& x, const Shape& shape);
Array concat(const std::vector<Array>& xs, int64_t dim);

}  // namespace trident::reference
