// Dims: a small inline list of int64 used for shapes and strides (at most kMaxDims dims),
// so creating a view never touches the heap for its metadata; and the shape arithmetic on
// them (contiguous strides, dim normalization, broadcasting, merging contiguous dims).
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace trident {

class Dims {
 public:
  static constexpr int kMaxDims = 8;

  Dims() = default;
  Dims(std::initializer_list<int64_t> dims);
  explicit Dims(std::span<const int64_t> dims);
  explicit Dims(const std::vector<int64_t>& dims) : Dims(std::span<const int64_t>(dims)) {}
  static Dims filled(int n, int64_t value);

  int size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t operator[](int i) const { return d_[i]; }
  int64_t& operator[](int i) { return d_[i]; }
  const int64_t* begin() const { return d_; }
  const int64_t* end() const { return d_ + n_; }
  int64_t* begin() { return d_; }
  int64_t* end() { return d_ + n_; }
  int64_t back() const { return d_[n_ - 1]; }
  std::span<const int64_t> span() const { return {d_, static_cast<size_t>(n_)}; }
  std::vector<int64_t> vec() const { return {begin(), end()}; }

  void push_back(int64_t v);
  void resize(int n, int64_t value = 0);
  void insert(int pos, int64_t v);
  void erase(int pos);

  // Product of all entries (1 for an empty list): the element count of a shape.
  int64_t product() const;
  std::string str() const;  // "(2, 3, 4)"

  friend bool operator==(const Dims& a, const Dims& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  int64_t d_[kMaxDims] = {};
  int n_ = 0;
};

using Shape = Dims;
using Strides = Dims;

std::ostream& operator<<(std::ostream& os, const Dims& dims);

// Row-major (C-contiguous) strides of a shape, in elements.
Strides contiguous_strides(const Shape& shape);

// Normalizes a possibly negative dim index against `ndim` dims; throws IndexError naming
// `what` (the op) if it is out of range.
int normalize_dim(int64_t dim, int ndim, const char* what);

// The broadcast of two shapes under NumPy rules; throws naming both shapes and `what`.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* what);

// Merges adjacent dims of `shape` that are contiguous with each other in every one of
// `strides` (strides[i - 1] == strides[i] * shape[i]) and drops dims of size 1, in place, so
// a strided loop over the result has fewer, longer inner loops and visits the same elements
// in the same order. Returns the number of dims left (0 when every dim had size 1).
template <class... S>
int coalesce_dims(Shape& shape, S&... strides) {
  static_assert((std::is_same_v<S, Strides> && ...), "coalesce_dims takes Strides");
  int n = 0;
  for (int i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (n > 0 && ((strides[n - 1] == strides[i] * shape[i]) && ...)) {
      shape[n - 1] *= shape[i];
      ((strides[n - 1] = strides[i]), ...);
    } else {
      shape[n] = shape[i];
      ((strides[n] = strides[i]), ...);
      ++n;
    }
  }
  shape.resize(n);
  (strides.resize(n), ...);
  return n;
}

}  // namespace trident
