// The storage layout of 4-bit NormalFloat (NF4) weights (quantization/nf4.h writes it; the host
// kernel kernels/cpu/nf4.h and each device's nf4_dequantize read it). Plain data and C++17, so
// a CUDA kernel takes it by value and reads the same layout.
//   codes          u16, four 4-bit codes each: weight 4k+i in bits 4i..4i+3 of element k
//   absmax_codes   double quantization: u16, two 8-bit codes each (block 2k in the low byte);
//                  block b's scale is group_scales[b / 256] * (code / 255)
//   group_scales   double quantization: f32, one per kNf4ScaleGroup blocks
//   absmax         without it: f32, one per block
// Weight i belongs to block i / kNf4Block; its value is kNf4Values[code] x its block's scale,
// computed in fp32 and rounded once to the destination's dtype.
#pragma once

#include <cstdint>

#include "core/rope_params.h"  // TRI_HOST_DEVICE

namespace trident {

inline constexpr int64_t kNf4Block = 64;        // weights per scale
inline constexpr int64_t kNf4ScaleGroup = 256;  // block scales per fp32 scale (double quantization)

// NF4's 16 values, ascending (bitsandbytes' table: quantiles of N(0, 1) scaled to [-1, 1];
// index 7 is 0). A macro too, to initialize a device's constant table with the same literals.
#define TRI_NF4_VALUES                                                                                    \
  -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f,         \
      -0.18477343022823334f, -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f,      \
      0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f,               \
      0.7229568362236023f, 1.0f
inline constexpr float kNf4Values[16] = {TRI_NF4_VALUES};

struct Nf4Data {
  const uint16_t* codes = nullptr;
  const uint16_t* absmax_codes = nullptr;  // double quantization
  const float* group_scales = nullptr;     // double quantization
  const float* absmax = nullptr;           // without it

  TRI_HOST_DEVICE float block_scale(int64_t block) const {
    if (absmax != nullptr) return absmax[block];
    const float code = static_cast<float>((absmax_codes[block / 2] >> (8 * (block % 2))) & 0xff);
    return group_scales[block / kNf4ScaleGroup] * (code / 255.0f);  // code 255: the group scale exactly
  }
  TRI_HOST_DEVICE int code(int64_t i) const { return (codes[i >> 2] >> ((i & 3) * 4)) & 15; }
};

}  // namespace trident
