// bf16 and f16 storage types. Arithmetic is never done in these types: kernels load them
// into float (the accumulation type), compute, and round once on store.
// Conversions round to nearest even and keep NaN/Inf, matching PyTorch and the hardware.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace trident {

struct bf16 {
  uint16_t bits = 0;

  bf16() = default;
  explicit bf16(float f) : bits(round_from_float(f)) {}
  operator float() const { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

  static bf16 from_bits(uint16_t b) {
    bf16 h;
    h.bits = b;
    return h;
  }
  static uint16_t round_from_float(float f) {
    uint32_t u = std::bit_cast<uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
    u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
    return static_cast<uint16_t>(u >> 16);
  }
};

struct f16 {
  uint16_t bits = 0;

  f16() = default;
  explicit f16(float f) : bits(round_from_float(f)) {}
  operator float() const { return to_float(bits); }

  static f16 from_bits(uint16_t b) {
    f16 h;
    h.bits = b;
    return h;
  }
  static float to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
      // Zero or subnormal: value = mant * 2^-24.
      float v = static_cast<float>(mant) * 0x1p-24f;
      return sign ? -v : v;
    }
    if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // Inf/NaN
    return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
  }
  static uint16_t round_from_float(float f) {
    const uint32_t u = std::bit_cast<uint32_t>(f);
    const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
    const uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return sign | 0x7e00u;      // NaN
    if (abs >= 0x477ff000u) return sign | 0x7c00u;     // rounds to >= 65520: Inf
    if (abs < 0x38800000u) {                           // below 2^-14: f16 subnormal or zero
      // Scale so that the f16 subnormal unit (2^-24) is 1.0, then round to nearest even.
      float scaled = std::bit_cast<float>(abs) * 0x1p24f;
#if __has_builtin(__builtin_roundevenf)
      float r = __builtin_roundevenf(scaled);
#else  // clang < 15 (the fuzz build): the same under the default rounding mode, which trident never changes
      float r = std::nearbyint(scaled);
#endif
      return sign | static_cast<uint16_t>(r);
    }
    uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);  // round mantissa to 10 bits
    return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
  }
};

static_assert(sizeof(bf16) == 2 && sizeof(f16) == 2);

}  // namespace trident
