// Per-row int8 quantization (src/kernels/cpu/int8_quantize.h) against its float64 definition,
// on every path this CPU runs (int8_isa.h), each path bitwise equal to the scalar one.
#include "kernels/cpu/int8_quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/check.h"

namespace trident::kernels::cpu {
namespace {

struct Rows {
  int64_t M, K, ldx, ldq;
  std::vector<float> x;
  Rows(int64_t m, int64_t k, int64_t pad, uint32_t seed) : M(m), K(k), ldx(k + pad), ldq(k + pad) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    x.resize(static_cast<size_t>(std::max<int64_t>(M * ldx, 1)));
    for (float& v : x) v = normal(rng);
  }
};

// Every code within half a step of x / scale (float64), |code| <= 127, the row's largest
// |x| at code +-127, and the scale absmax / 127 to fp32 rounding.
void expect_within_half_step(const Rows& r, const std::vector<int8_t>& q, const std::vector<float>& scale) {
  for (int64_t m = 0; m < r.M; ++m) {
    double absmax = 0;
    for (int64_t k = 0; k < r.K; ++k) absmax = std::max(absmax, std::fabs(double{r.x[m * r.ldx + k]}));
    const double s = absmax / 127.0;
    ASSERT_NEAR(scale[m], s, s * 1.2e-7) << "row " << m;
    for (int64_t k = 0; k < r.K; ++k) {
      const double x = r.x[m * r.ldx + k], code = q[m * r.ldq + k];
      ASSERT_LE(std::fabs(code), 127.0);
      // Half a step, plus the two fp32 roundings of the code's argument (x * 127 / absmax).
      ASSERT_LE(std::fabs(code - x / s), 0.5 + 127 * 2.4e-7) << "row " << m << " column " << k << " x " << x;
      if (std::fabs(x) == absmax) {
        ASSERT_EQ(std::fabs(code), 127.0) << "row " << m << " column " << k;
      }
    }
  }
}

TEST(Int8Quantize, RowsWithinHalfAStepOnEveryPathAndBitwiseEqual) {
  for (auto [M, K, pad] : {std::tuple{1, 1, 0}, {1, 768, 0}, {3, 17, 5}, {7, 100, 3}, {2, 3072, 0}, {5, 63, 1}}) {
    Rows r(M, K, pad, static_cast<uint32_t>(M * 131 + K));
    std::vector<int8_t> reference;
    std::vector<float> reference_scale;
    for (Int8Isa isa : int8_isa_supported_paths()) {
      std::vector<int8_t> q(r.x.size(), 99);
      std::vector<float> scale(M, -1.0f);
      quantize_rows_int8(r.x.data(), M, K, r.ldx, q.data(), r.ldq, scale.data(), isa);
      SCOPED_TRACE(std::string(int8_isa_name(isa)) + " M=" + std::to_string(M) + " K=" + std::to_string(K));
      expect_within_half_step(r, q, scale);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t k = K; k < r.ldq; ++k) ASSERT_EQ(q[m * r.ldq + k], 99) << "padding written";
      if (reference.empty()) {
        reference = q, reference_scale = scale;
        continue;
      }
      EXPECT_EQ(q, reference);
      EXPECT_EQ(scale, reference_scale);
    }
  }
}

TEST(Int8Quantize, ZeroRowsAndNonFiniteRows) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const int64_t K = 37;
  for (Int8Isa isa : int8_isa_supported_paths()) {
    SCOPED_TRACE(int8_isa_name(isa));
    std::vector<float> x(4 * K, 0.0f);
    for (int64_t k = 0; k < K; ++k) x[1 * K + k] = x[2 * K + k] = x[3 * K + k] = 0.25f * static_cast<float>(k);
    x[2 * K + 20] = nan;  // row 2: a NaN past the first vector
    x[3 * K + 36] = -inf; // row 3: an infinity in the tail
    std::vector<int8_t> q(x.size(), 99);
    std::vector<float> scale(4, -1.0f);
    quantize_rows_int8(x.data(), 4, K, K, q.data(), K, scale.data(), isa);
    EXPECT_EQ(scale[0], 0.0f);
    EXPECT_EQ(scale[1], 0.25f * 36 / 127.0f);
    EXPECT_TRUE(std::isnan(scale[2]));
    EXPECT_TRUE(std::isnan(scale[3]));
    for (int64_t k = 0; k < K; ++k) {
      EXPECT_EQ(q[0 * K + k], 0);
      EXPECT_EQ(q[2 * K + k], 0);
      EXPECT_EQ(q[3 * K + k], 0);
    }
    EXPECT_EQ(q[1 * K + 36], 127);
  }
}

TEST(Int8Quantize, BadStridesNameTheValues) {
  std::vector<float> x(8);
  std::vector<int8_t> q(8);
  float s;
  try {
    quantize_rows_int8(x.data(), 1, 8, 4, q.data(), 8, &s);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ldx=4"), std::string::npos) << e.what();
  }
}

TEST(Int8Isa, NamesRoundTripAndUnknownNamesAreErrors) {
  for (Int8Isa isa : {Int8Isa::kAuto, Int8Isa::kScalar, Int8Isa::kAvx2, Int8Isa::kAvxVnni, Int8Isa::kAvx512Vnni})
    EXPECT_EQ(int8_isa_from_name(int8_isa_name(isa), "test"), isa);
  try {
    (void)int8_isa_from_name("avx512", "TRIDENT_TEST_ISA");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TRIDENT_TEST_ISA is \"avx512\""), std::string::npos) << e.what();
  }
  EXPECT_NE(int8_isa_resolve(Int8Isa::kAuto), Int8Isa::kAuto);
  EXPECT_TRUE(int8_isa_supported_names().ends_with("scalar"));
  for (Int8Isa isa : {Int8Isa::kAvx2, Int8Isa::kAvxVnni, Int8Isa::kAvx512Vnni})
    if (!int8_isa_supported(isa)) std::cout << "[ skipped  ] int8 path " << int8_isa_name(isa) << ": this CPU lacks it\n";
}

}  // namespace
}  // namespace trident::kernels::cpu
