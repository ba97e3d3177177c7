// Creating tensors: uninitialized, filled, from host data, and back to host vectors.
// New tensors are contiguous. Their memory is tagged with the current MemoryCategoryGuard
// unless a category is given.
#pragma once

#include <span>
#include <vector>

#include "core/copy.h"
#include "core/tensor.h"

namespace trident {

Tensor empty(const Shape& shape, DType dtype = DType::kF32, Device device = Device::cpu());
Tensor empty(const Shape& shape, DType dtype, Device device, MemoryCategory category);
// A host tensor in page-locked memory (pinned_host_allocator()): the staging side of fast
// host <-> device copies (ZeRO-Offload's masters and gradients).
Tensor empty_pinned(const Shape& shape, DType dtype);
Tensor zeros(const Shape& shape, DType dtype = DType::kF32, Device device = Device::cpu());
Tensor ones(const Shape& shape, DType dtype = DType::kF32, Device device = Device::cpu());
Tensor full(const Shape& shape, double value, DType dtype = DType::kF32,
            Device device = Device::cpu());
Tensor scalar_tensor(double value, DType dtype = DType::kF32);  // shape ()
Tensor arange(int64_t n, DType dtype = DType::kI64);            // 0, 1, ..., n-1
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);

// Sets every element of t (any strides) to value, converted to t's dtype. Bumps the version.
void fill_(const Tensor& t, double value);

// A tensor of `shape` holding a copy of `data` (whose length must equal the element count).
template <class T>
Tensor from_data(std::span<const T> data, const Shape& shape) {
  TRI_CHECK(static_cast<int64_t>(data.size()) == shape.product(), "from_data: ", data.size(),
            " values for shape ", shape, " (", shape.product(), " elements)");
  Tensor t = empty(shape, dtype_of<T>());
  std::copy(data.begin(), data.end(), t.data_ptr<T>());
  return t;
}
template <class T>
Tensor from_vector(const std::vector<T>& data, const Shape& shape) {
  return from_data(std::span<const T>(data), shape);
}

// The values of t in row-major order, converted to T.
template <class T>
std::vector<T> to_vector(const Tensor& t) {
  Tensor c = core::to_device(core::cast(t, dtype_of<T>()), Device::cpu());
  const T* p = c.data_ptr<T>();
  return std::vector<T>(p, p + c.numel());
}

}  // namespace trident
