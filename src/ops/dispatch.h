// Dtype dispatch for op front ends: one switch, calling a templated lambda with the element
// type, e.g.  dispatch_floating(x.dtype(), "layernorm", [&]<class T>() { kernel<T>(...); });
#pragma once

#include "core/check.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "kernels/device/device_kernels.h"

namespace trident::ops {

template <class Fn>
void dispatch_floating(DType dtype, const char* what, const Fn& fn) {
  switch (dtype) {
    case DType::kF32: return fn.template operator()<float>();
    case DType::kF64: return fn.template operator()<double>();
    case DType::kBF16: return fn.template operator()<bf16>();
    case DType::kF16: return fn.template operator()<f16>();
    default: break;
  }
  TRI_CHECK_TYPE(false, what, ": dtype ", dtype, " is not supported (expected f32, f64, bf16 or f16)");
}

// Tensors on a device other than the host run the device backend's kernels
// (kernels/device/device_kernels.h); the front end's checks and allocation are shared.
inline bool on_device(const Tensor& t) { return !t.device().is_cpu(); }
inline kernels::DeviceKernels& device_kernels_of(const Tensor& t) { return kernels::device_kernels(t.device()); }

template <class Fn>
void dispatch_index(DType dtype, const char* what, const Fn& fn) {
  switch (dtype) {
    case DType::kI32: return fn.template operator()<int32_t>();
    case DType::kI64: return fn.template operator()<int64_t>();
    case DType::kU16: return fn.template operator()<uint16_t>();
    default: break;
  }
  TRI_CHECK_TYPE(false, what, ": index dtype ", dtype, " is not supported (expected i32, i64 or u16)");
}

}  // namespace trident::ops
