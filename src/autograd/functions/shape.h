// Differentiable shape and layout operations. Except where noted, the result is a view:
// it shares storage with the input and copies nothing.
// Backward rules: autograd/derivatives/shape.cc.
#pragma once

#include <initializer_list>
#include <span>

#include "core/tensor.h"

namespace trident {

// A view when the strides allow it, else a contiguous copy (one -1 entry is inferred).
Tensor reshape(const Tensor& x, std::span<const int64_t> shape);
inline Tensor reshape(const Tensor& x, std::initializer_list<int64_t> shape) {
  return reshape(x, std::span<const int64_t>(shape.begin(), shape.size()));
}
// Always a view; throws when a copy would be needed.
Tensor view(const Tensor& x, std::span<const int64_t> shape);
inline Tensor view(const Tensor& x, std::initializer_list<int64_t> shape) {
  return view(x, std::span<const int64_t>(shape.begin(), shape.size()));
}
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor permute(const Tensor& x, std::span<const int64_t> dims);
inline Tensor permute(const Tensor& x, std::initializer_list<int64_t> dims) {
  return permute(x, std::span<const int64_t>(dims.begin(), dims.size()));
}
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor expand(const Tensor& x, const Shape& shape);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor squeeze(const Tensor& x, int64_t dim);
// A contiguous tensor with the same values (x's values in a new buffer if x is not contiguous).
Tensor contiguous(const Tensor& x);
// Converts to another floating dtype (the gradient is converted back).
Tensor to(const Tensor& x, DType dtype);

}  // namespace trident
