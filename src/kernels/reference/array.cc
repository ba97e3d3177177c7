#include "kernels/reference/array.h"

#include "core/check.h"

namespace trident::reference {

Array::Array(const Shape& s, std::vector<double> values) : shape(s), data(std::move(values)) {
  TRI_CHECK(static_cast<int64_t>(data.size()) == shape.product(), "reference::Array: ",
            data.size(), " values for shape ", shape);
}

double& Array::at(std::initializer_list<int64_t> index) {
  TRI_ASSERT(static_cast<int>(index.size()) == dim(), "index rank");
  return data[static_cast<size_t>(flat_index(shape, index.begin()))];
}

double Array::at(std::initializer_list<int64_t> index) const {
  TRI_ASSERT(static_cast<int>(index.size()) == dim(), "index rank");
  return data[static_cast<size_t>(flat_index(shape, index.begin()))];
}

int64_t flat_index(const Shape& shape, const int64_t* index) {
  int64_t flat = 0;
  for (int i = 0; i < shape.size(); ++i) flat = flat * shape[i] + index[i];
  return flat;
}

void unravel_index(int64_t flat, const Shape& shape, int64_t* index) {
  for (int i = shape.size() - 1; i >= 0; --i) {
    index[i] = flat % shape[i];
    flat /= shape[i];
  }
}

}  // namespace trident::reference
