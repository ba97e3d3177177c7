// Data movement that is part of what a tensor is: strided copy, contiguous(), dtype casts.
// These live in namespace trident::core because they record no autograd history: the
// differentiable trident::contiguous and trident::to (autograd/functions/shape.h) build on them.
#pragma once

#include "core/tensor.h"

namespace trident::core {

// Copies src into dst element by element, converting dtype; src must broadcast to dst's shape.
// Bumps dst's version. dst and src must not overlap partially.
void copy_(const Tensor& dst, const Tensor& src);
// `t` itself if already contiguous, else a contiguous copy.
Tensor contiguous(const Tensor& t);
// A new contiguous tensor with the same values.
Tensor clone(const Tensor& t);
// A contiguous tensor of `dtype`: `t` itself if it already is one, else a converted copy.
Tensor cast(const Tensor& t, DType dtype);
// `t` on `device` (itself if already there): a copy through the device's backend.
Tensor to_device(const Tensor& t, Device device);
// A contiguous copy of t (from any device) in page-locked host memory (torch's pin_memory).
Tensor pin_memory(const Tensor& t);
// Starts copying src into dst, one on a device and the other on the host (pinned), both
// contiguous, of one shape and dtype, behind the device's queued work and overlapping its later
// work where the backend can (DeviceOps::copy_async; else synchronously). dst holds the values
// once wait_async_copies(device) returns; both tensors must stay alive and untouched until then.
void copy_async_(const Tensor& dst, const Tensor& src);
void wait_async_copies(Device device);
// Copies src's bytes into dst, one on a device and the other on the host, both contiguous, of
// one shape and dtype, and returns when done, leaving dst's version as it was: as a
// communicator writes its results (ZeRO-3 refills, for the backward, a gathered buffer whose
// parameter views autograd saved in the forward; PyTorch FSDP keeps the counter the same way).
void copy_bytes_(const Tensor& dst, const Tensor& src);

}  // namespace trident::core
