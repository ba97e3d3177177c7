// The float64 oracle's data type: a dense row-major array of doubles with a shape.
// Reference kernels (this folder) are naive and written for clarity, never for speed:
// tests compare every optimized kernel against them.
#pragma once

#include <cstdint>
#include <vector>

#include "core/shape.h"

namespace trident::reference {

struct Array {
  Shape shape;
  std::vector<double> data;

  Array() = default;
  explicit Array(const Shape& s, double fill = 0.0)
      : shape(s), data(static_cast<size_t>(s.product()), fill) {}
  Array(const Shape& s, std::vector<double> values);

  int64_t numel() const { return static_cast<int64_t>(data.size()); }
  int dim() const { return shape.size(); }
  double& operator[](int64_t i) { return data[static_cast<size_t>(i)]; }
  double operator[](int64_t i) const { return data[static_cast<size_t>(i)]; }
  // Element at a multi-index (row-major).
  double& at(std::initializer_list<int64_t> index);
  double at(std::initializer_list<int64_t> index) const;
};

// Row-major flat index of a multi-index into shape, and back.
int64_t flat_index(const Shape& shape, const int64_t* index);
void unravel_index(int64_t flat, const Shape& shape, int64_t* index);

}  // namespace trident::reference
