#include "core/rng.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/factory.h"
#include "core/parallel.h"

namespace trident {
namespace {

TEST(Philox, MatchesTheRandom123KnownAnswer) {
  // Known-answer test from Random123 (kat_vectors): philox4x32_10, counter and key all zero.
  // Our counter packs (lo, hi, 0, 0) and the key (seed lo, seed hi).
  const auto r = philox4x32(0, 0);
  EXPECT_EQ(r[0], 0x6627e8d5u);
  EXPECT_EQ(r[1], 0xe169c58du);
  EXPECT_EQ(r[2], 0xbc57ac4cu);
  EXPECT_EQ(r[3], 0x9b00dbd8u);
}

TEST(Generator, DeterministicAndIndependentOfThreads) {
  Generator g1(42), g2(42);
  set_num_threads(1);
  const auto a = to_vector<float>(randn({100000}, g1));
  set_num_threads(2);
  const auto b = to_vector<float>(randn({100000}, g2));
  EXPECT_EQ(a, b);
  EXPECT_EQ(g1.offset(), 100000u);
  // The next draw continues from the offset: different values.
  EXPECT_NE(to_vector<float>(randn({4}, g1)), std::vector<float>(a.begin(), a.begin() + 4));
}

TEST(Generator, NormalHasUnitMoments) {
  Generator g(7);
  const auto v = to_vector<double>(randn({200000}, g, DType::kF64));
  double m = 0, s = 0;
  for (double x : v) m += x;
  m /= static_cast<double>(v.size());
  for (double x : v) s += (x - m) * (x - m);
  s = std::sqrt(s / static_cast<double>(v.size()));
  EXPECT_NEAR(m, 0.0, 0.01);
  EXPECT_NEAR(s, 1.0, 0.01);
}

TEST(Generator, RandintStaysInRange) {
  Generator g(3);
  for (int64_t v : to_vector<int64_t>(randint(5, 9, {1000}, g))) {
    EXPECT_GE(v, 5);
    EXPECT_LT(v, 9);
  }
}

}  // namespace
}  // namespace trident
