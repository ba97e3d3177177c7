// Alias-making primitives: each returns a new Tensor over the same storage, never copying.
// These do not record autograd history; the differentiable versions are trident::reshape,
// trident::transpose, ... in autograd/functions.h, which build on these.
//
// Errors name the op, the input shape and the offending argument.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "core/tensor.h"

namespace trident::views {

// Resolves one -1 entry of `shape` so that it has `numel` elements; checks the product.
Shape infer_shape(std::span<const int64_t> shape, int64_t numel, const char* what);
// Strides that let `t` be viewed with `shape` without a copy, if any exist.
std::optional<Strides> view_strides(const Tensor& t, const Shape& shape);

Tensor view(const Tensor& t, std::span<const int64_t> shape);  // throws if a copy is needed
inline Tensor view(const Tensor& t, std::initializer_list<int64_t> shape) {
  return views::view(t, std::span<const int64_t>(shape.begin(), shape.size()));
}
Tensor transpose(const Tensor& t, int64_t dim0, int64_t dim1);
Tensor permute(const Tensor& t, std::span<const int64_t> dims);
inline Tensor permute(const Tensor& t, std::initializer_list<int64_t> dims) {
  return views::permute(t, std::span<const int64_t>(dims.begin(), dims.size()));
}
Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& t, int64_t dim, int64_t index);  // removes `dim`
Tensor expand(const Tensor& t, const Shape& shape);          // broadcast with stride 0
Tensor unsqueeze(const Tensor& t, int64_t dim);
Tensor squeeze(const Tensor& t, int64_t dim);                 // dim must have size 1
Tensor as_strided(const Tensor& t, const Shape& shape, const Strides& strides, int64_t offset);

}  // namespace trident::views
