#include "core/factory.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/device_ops.h"
#include "core/parallel.h"

namespace trident {

Tensor empty(const Shape& shape, DType dtype, Device device, MemoryCategory category) {
  for (int i = 0; i < shape.size(); ++i)
    TRI_CHECK(shape[i] >= 0, "empty: shape ", shape, " has a negative size at dim ", i);
  const size_t nbytes = static_cast<size_t>(shape.product()) * element_size(dtype);
  Storage storage = allocate_storage(nbytes, device, category);
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), shape, contiguous_strides(shape),
                                             0, dtype));
}

Tensor empty_pinned(const Shape& shape, DType dtype) {
  for (int i = 0; i < shape.size(); ++i)
    TRI_CHECK(shape[i] >= 0, "empty_pinned: shape ", shape, " has a negative size at dim ", i);
  const size_t nbytes = static_cast<size_t>(shape.product()) * element_size(dtype);
  Storage storage =
      std::make_shared<StorageImpl>(pinned_host_allocator().allocate(nbytes, MemoryCategoryGuard::current()));
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), shape, contiguous_strides(shape), 0, dtype));
}

Tensor empty(const Shape& shape, DType dtype, Device device) {
  return empty(shape, dtype, device, MemoryCategoryGuard::current());
}

Tensor zeros(const Shape& shape, DType dtype, Device device) {
  return full(shape, 0.0, dtype, device);
}

Tensor ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1.0, dtype, device);
}

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  fill_(t, value);
  return t;
}

Tensor scalar_tensor(double value, DType dtype) { return full(Shape{}, value, dtype); }

Tensor arange(int64_t n, DType dtype) {
  TRI_CHECK(n >= 0, "arange: n must be >= 0, got ", n);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return core::cast(from_vector(v, Shape{n}), dtype);
}

Tensor empty_like(const Tensor& t) { return empty(t.shape(), t.dtype(), t.device()); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype(), t.device()); }

void fill_(const Tensor& t, double value) {
  if (!t.device().is_cpu()) {
    const DeviceOps* ops = device_ops(t.device().type);
    TRI_CHECK_NOT_IMPLEMENTED(ops != nullptr && ops->fill != nullptr, "fill_: device ", t.device(),
                              " is not available in this build");
    if (!t.is_contiguous()) {  // fill one element, then broadcast it through the strides
      const Tensor one = empty(Shape{}, t.dtype(), t.device());
      ops->fill(one.raw_data(), one.dtype(), 1, value);
      core::copy_(t, one);
      return;
    }
    ops->fill(t.raw_data(), t.dtype(), t.numel(), value);
    t.bump_version();
    return;
  }
  // A one-element f64 source: copy_ converts it to t's dtype.
  Tensor src = empty(Shape{}, DType::kF64, t.device());
  *src.data_ptr<double>() = value;
  if (!t.is_contiguous() || t.numel() <= 1) return core::copy_(t, src);  // broadcast through any strides
  // Contiguous: convert once, then replicate the element's bytes (a broadcast copy_ would
  // convert per element, without vectorizing: gradients of views are zero-filled every step).
  Tensor one = empty(Shape{}, t.dtype(), t.device());
  core::copy_(one, src);
  auto replicate = [&](auto pattern) {
    using Word = decltype(pattern);
    std::memcpy(&pattern, one.raw_data(), sizeof(Word));
    Word* dst = static_cast<Word*>(t.raw_data());
    parallel_for(0, t.numel(), 1 << 16, [&](int64_t b, int64_t e) { std::fill(dst + b, dst + e, pattern); });
  };
  switch (element_size(t.dtype())) {
    case 1: replicate(uint8_t{}); break;
    case 2: replicate(uint16_t{}); break;
    case 4: replicate(uint32_t{}); break;
    case 8: replicate(uint64_t{}); break;
    default: return core::copy_(t, src);
  }
  t.bump_version();
}

}  // namespace trident
