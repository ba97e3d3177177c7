// NF4 weights (core/nf4_layout.h) to a dtype, on the host or a device: the front end of
// kernels/cpu/nf4.h and each device's nf4_dequantize. quantization/nf4.h owns the tensors that
// hold a weight's codes and scales and hands their addresses here.
#pragma once

#include <cstdint>

#include "core/nf4_layout.h"
#include "core/tensor.h"

namespace trident::ops {

// Weights [begin, end) of the NF4 weight at `w`, whose tensors live on `device`, as a new 1-D
// tensor of `dtype` (floating) on that device. Parallel over blocks on the host.
Tensor nf4_dequantize(const Nf4Data& w, Device device, int64_t begin, int64_t end, DType dtype);

// The same into `out`: end - begin contiguous elements of `dtype` on `device`.
void nf4_dequantize_into(const Nf4Data& w, Device device, int64_t begin, int64_t end, DType dtype, void* out);

}  // namespace trident::ops
