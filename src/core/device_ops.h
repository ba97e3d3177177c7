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
  // Within the device: element i of an ndim-dim view of `shape` goes from src (any strides,
  // including 0, of src_dtype) to dst (non-overlapping strides, of dst_dtype), converting.
  // Strides count elements. Makes tensors contiguous and casts them on the device.
  void (*copy_strided)(void* dst, DType dst_dtype, const int64_t* dst_strides, const void* src, DType src_dtype,
                       const int64_t* src_strides, const int64_t* shape, int ndim) = nullptr;
  // Returns when all work queued on the device so far is done (timings, host reads).
  void (*synchronize)() = nullptr;
  // Optional (nullptr: copy is used, synchronously). Starts copying nbytes between the device
  // and (pinned) host memory after the work queued on the device so far, on a stream of its
  // own, so that it overlaps the work queued after it; complete only once wait_copies returns.
  void (*copy_async)(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) = nullptr;
  void (*wait_copies)() = nullptr;
  // Optional (nullptr: nothing to do). Opens (start) or closes the range that an external
  // profiler attached with "profile from start off" records (CUDA: cudaProfilerStart/Stop, for
  // Nsight Compute's --profile-from-start off), so that it sees only the steps asked for.
  void (*profiler_range)(bool start) = nullptr;
};

void register_device_ops(DeviceType type, const DeviceOps& ops);
// nullptr when no backend of this build handles the type.
const DeviceOps* device_ops(DeviceType type);
// Waits for the device's queued work; nothing to do on the host.
void synchronize(Device device);
// Opens or closes the device's external-profiler range (DeviceOps::profiler_range); nothing to
// do on the host or on a device without one.
void profiler_range(Device device, bool start);

}  // namespace trident
