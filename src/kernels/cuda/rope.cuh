// Rotary position embedding on contiguous x (B, T, H, D): the contract of kernels/cpu/rope.h
// (angles and cos/sin in double, products in acc_t). out may equal x. positions: (B, T) i64 on
// the device (the token at (b, t) has position positions[b*T + t]), or null (pos0 + t).
#pragma once

#include <cstdint>

#include "core/rope_params.h"

namespace trident::cuda {

using trident::RopeParams;

void launch_rope(int dtype, void* out, const void* x, int64_t B, int64_t T, int64_t H, int64_t D, const RopeParams& params,
                 int64_t pos0, const int64_t* positions, bool inverse);

}  // namespace trident::cuda
