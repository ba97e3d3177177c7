// Rotary position embedding on contiguous x (B, T, H, D): the contract of kernels/cpu/rope.h
// (angles and cos/sin in double, products in acc_t). out may equal x.
#pragma once

#include <cstdint>

#include "core/rope_params.h"

namespace trident::cuda {

using trident::RopeParams;

void launch_rope(int dtype, void* out, const void* x, int64_t B, int64_t T, int64_t H, int64_t D, const RopeParams& params,
                 int64_t pos0, bool inverse);

}  // namespace trident::cuda
