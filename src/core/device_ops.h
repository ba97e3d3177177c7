// What a device backend gives the core so that tensors can live on its device: moving bytes
// to and from the host (and within the device), and filling. The backend registers them at
// start-up (the CUDA backend: kernels/cuda/cuda_backend.cc); core::copy_ and fill_ use them
// for any tensor that is not on the host. Compute kernels are the backend's own business
// (ops dispatch on the device, issue #7).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/device.h"
#include "core/dtype.h"

namespace trident {

struct DeviceOps {
  // nbytes from src to dst, either of which may be host memory; returns when done.
  void (*copy)(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) = nullptr;
  // n elements of dtype at dst (on the device) set to value.
  void (*fill)(void* dst, DType dtype, int64_t n, double value) = nullptr;
};

void register_device_ops(DeviceType type, const DeviceOps& ops);
// nullptr when no backend of this build handles the type.
const DeviceOps* device_ops(DeviceType type);

}  // namespace trident
