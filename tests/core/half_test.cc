#include "core/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace trident {
namespace {

// The compiler's _Float16 (IEEE binary16, round-to-nearest-even) is the oracle for f16.
TEST(F16, EveryBitPatternRoundTripsThroughFloat) {
  for (uint32_t b = 0; b < 65536; ++b) {
    _Float16 h;
    const uint16_t bits = static_cast<uint16_t>(b);
    std::memcpy(&h, &bits, 2);
    const float want = static_cast<float>(h);
    const float got = f16::to_float(bits);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << b;
      continue;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << "bits " << b;
    ASSERT_EQ(f16::round_from_float(want), bits) << "bits " << b;
  }
}

TEST(F16, RoundsLikeTheCompiler) {
  // Values between representable halves, around subnormals, and overflow.
  const float probes[] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 0x1p-25f, 0x1p-24f * 1.5f,
                          0x1p-14f * 0.999f, 65504.0f, 65519.0f, 65520.0f, 1e9f, -2.5e-8f};
  for (float f : probes) {
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t want;
    std::memcpy(&want, &h, 2);
    EXPECT_EQ(f16::round_from_float(f), want) << f;
  }
  uint32_t x = 12345;
  for (int i = 0; i < 200000; ++i) {
    x = x * 1664525u + 1013904223u;
    const float f = std::bit_cast<float>((x & 0x8fffffffu) | 0x30000000u);  // wide exponent range
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t want;
    std::memcpy(&want, &h, 2);
    ASSERT_EQ(f16::round_from_float(f), want) << f;
  }
}

TEST(BF16, RoundsToNearestEven) {
  EXPECT_EQ(bf16(1.0f).bits, 0x3f80);
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(bf16(1.0f + 0x1p-8f).bits, 0x3f80);
  // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even): rounds up.
  EXPECT_EQ(bf16(1.0f + 3 * 0x1p-8f).bits, 0x3f82);
  EXPECT_EQ(static_cast<float>(bf16(-2.5f)), -2.5f);
  EXPECT_TRUE(std::isnan(static_cast<float>(bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(static_cast<float>(bf16(std::numeric_limits<float>::infinity()))));
  // The largest finite float rounds to infinity in bf16, as in PyTorch.
  EXPECT_TRUE(std::isinf(static_cast<float>(bf16(std::numeric_limits<float>::max()))));
}

}  // namespace
}  // namespace trident
