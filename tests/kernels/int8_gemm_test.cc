// The W8A8 GEMM (src/kernels/cpu/int8_gemm.h) against exact integer sums in 64 bits, on every
// path this CPU runs: with unit scales the result is the integer sum rounded once to fp32,
// bit for bit; with scales and a bias, within the three fp32 roundings of the epilogue; and
// every path gives the scalar path's bits, at any thread count.
#include "kernels/cpu/int8_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/check.h"
#include "core/parallel.h"
#include "kernels/cpu/int8_quantize.h"
#include "kernels/cpu/onednn_int8_gemm.h"

namespace trident::kernels::cpu {
namespace {

struct W8A8Shape {
  int64_t M, N, K, pad;
};

std::string describe(const W8A8Shape& s) {
  return "M=" + std::to_string(s.M) + " N=" + std::to_string(s.N) + " K=" + std::to_string(s.K) +
         " pad=" + std::to_string(s.pad);
}

// Codes drawn from [lo, hi] (all of [-127, 127] by default; the extremes to push the sums).
struct W8A8Problem {
  W8A8Shape s;
  int64_t lda, ldw, ldc;
  std::vector<int8_t> a, w;
  std::vector<float> a_scale, w_scale, bias;
  W8A8Problem(const W8A8Shape& shape, uint32_t seed, bool extremes = false) : s(shape) {
    lda = s.K + s.pad, ldw = s.K + s.pad, ldc = s.N + s.pad;
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> code(-127, 127), coin(0, 1);
    auto draw = [&] { return static_cast<int8_t>(extremes ? (coin(rng) ? 127 : -127) : code(rng)); };
    a.resize(static_cast<size_t>(std::max<int64_t>(s.M * lda, 1)));
    w.resize(static_cast<size_t>(std::max<int64_t>(s.N * ldw, 1)));
    for (auto& v : a) v = draw();
    for (auto& v : w) v = draw();
    std::uniform_real_distribution<float> positive(1e-3f, 2e-2f), any(-3.0f, 3.0f);
    for (int64_t m = 0; m < s.M; ++m) a_scale.push_back(positive(rng));
    for (int64_t n = 0; n < s.N; ++n) w_scale.push_back(positive(rng)), bias.push_back(any(rng));
  }
  int64_t dot(int64_t m, int64_t n) const {
    int64_t sum = 0;
    for (int64_t k = 0; k < s.K; ++k) sum += int64_t{a[m * lda + k]} * int64_t{w[n * ldw + k]};
    return sum;
  }
  std::vector<float> run(const Int8PackedWeights& packed, const float* a_scales, const float* b, Int8Isa isa) const {
    std::vector<float> c(static_cast<size_t>(std::max<int64_t>(s.M * ldc, 1)), -7.0f);
    int8_gemm(s.M, a.data(), lda, a_scales, packed, b, c.data(), ldc, isa);
    return c;
  }
};

const W8A8Shape kShapes[] = {
    {1, 1, 1, 0},      {1, 17, 5, 0},    {1, 2304, 768, 0}, {3, 33, 67, 3},   {8, 49, 130, 0},
    {9, 50, 131, 2},   {13, 47, 3, 1},   {6, 16, 64, 0},    {300, 41, 100, 0}, {5, 768, 3072, 0},
    {2, 7, 4096, 5},   {257, 96, 36, 0}, {0, 5, 5, 0},      {4, 0, 5, 0},     {2, 3, 0, 0},
};

TEST(Int8Gemm, UnitScalesGiveTheExactSumRoundedOnceOnEveryPath) {
  for (const W8A8Shape& shape : kShapes) {
    const W8A8Problem p(shape, static_cast<uint32_t>(shape.M * 7919 + shape.N * 31 + shape.K));
    const std::vector<float> ones_m(std::max<int64_t>(shape.M, 1), 1.0f), ones_n(std::max<int64_t>(shape.N, 1), 1.0f);
    const Int8PackedWeights packed(p.w.data(), shape.N, shape.K, p.ldw, ones_n.data());
    for (Int8Isa isa : int8_isa_supported_paths()) {
      SCOPED_TRACE(std::string(int8_isa_name(isa)) + " " + describe(shape));
      const std::vector<float> c = p.run(packed, ones_m.data(), nullptr, isa);
      for (int64_t m = 0; m < shape.M; ++m) {
        for (int64_t n = 0; n < shape.N; ++n) {
          const int64_t exact = p.dot(m, n);
          ASSERT_EQ(c[m * p.ldc + n], static_cast<float>(exact)) << "m " << m << " n " << n << " sum " << exact;
        }
        for (int64_t n = shape.N; n < p.ldc; ++n) ASSERT_EQ(c[m * p.ldc + n], -7.0f) << "padding of row " << m;
      }
    }
  }
}

// float(sum), a_scale * w_scale and the product (or fma with the bias) round once each:
// |error| <= 3u (|sum x a_scale x w_scale| + |bias|) with u = 2^-24, in float64.
TEST(Int8Gemm, ScalesAndBiasWithinTheEpiloguesRoundingAndPathsBitwiseEqual) {
  for (const W8A8Shape& shape : kShapes) {
    for (bool with_bias : {false, true}) {
      const W8A8Problem p(shape, static_cast<uint32_t>(shape.N * 131 + shape.K + with_bias));
      const Int8PackedWeights packed(p.w.data(), shape.N, shape.K, p.ldw, p.w_scale.data());
      const float* bias = with_bias ? p.bias.data() : nullptr;
      const std::vector<float> scalar = p.run(packed, p.a_scale.data(), bias, Int8Isa::kScalar);
      for (Int8Isa isa : int8_isa_supported_paths()) {
        SCOPED_TRACE(std::string(int8_isa_name(isa)) + " " + describe(shape) + (with_bias ? " bias" : ""));
        const std::vector<float> c = p.run(packed, p.a_scale.data(), bias, isa);
        for (int64_t m = 0; m < shape.M; ++m)
          for (int64_t n = 0; n < shape.N; ++n) {
            const double product = static_cast<double>(p.dot(m, n)) * p.a_scale[m] * p.w_scale[n];
            const double b = with_bias ? p.bias[n] : 0.0;
            const double tol = 3.0 * std::ldexp(1.0, -24) * (std::fabs(product) + std::fabs(b)) + 1e-30;
            const double got = c[m * p.ldc + n], expected = product + b;
            ASSERT_LE(std::fabs(got - expected), tol)
                << "m " << m << " n " << n << " expected " << expected << " got " << got << " tol " << tol;
          }
        ASSERT_EQ(std::memcmp(c.data(), scalar.data(), c.size() * sizeof(float)), 0) << "differs from scalar";
      }
    }
  }
}

// All codes +-127 and long rows: the largest sums the int32 accumulators and the AVX2 path's
// int16 pairs meet (Note [Int8 signs]); nothing saturates.
TEST(Int8Gemm, ExtremeCodesDoNotSaturate) {
  for (const W8A8Shape& shape : {W8A8Shape{4, 40, 3072, 0}, W8A8Shape{9, 19, 8191, 1}}) {
    const W8A8Problem p(shape, 5, /*extremes=*/true);
    const std::vector<float> ones_m(shape.M, 1.0f), ones_n(shape.N, 1.0f);
    const Int8PackedWeights packed(p.w.data(), shape.N, shape.K, p.ldw, ones_n.data());
    for (Int8Isa isa : int8_isa_supported_paths()) {
      SCOPED_TRACE(std::string(int8_isa_name(isa)) + " " + describe(shape));
      const std::vector<float> c = p.run(packed, ones_m.data(), nullptr, isa);
      for (int64_t m = 0; m < shape.M; ++m)
        for (int64_t n = 0; n < shape.N; ++n) ASSERT_EQ(c[m * p.ldc + n], static_cast<float>(p.dot(m, n)));
    }
    // Row 0 against itself: the sum of K squares of 127.
    std::vector<int8_t> same(p.a.begin(), p.a.begin() + shape.K);
    const float one = 1.0f;
    const Int8PackedWeights self(same.data(), 1, shape.K, shape.K, &one);
    for (Int8Isa isa : int8_isa_supported_paths()) {
      float c = 0;
      int8_gemm(1, same.data(), shape.K, &one, self, nullptr, &c, 1, isa);
      EXPECT_EQ(c, static_cast<float>(shape.K * 127 * 127)) << int8_isa_name(isa);
    }
  }
}

// oneDNN's int8 matmul (onednn_int8_gemm.h) under the same contract: the scalar path's bits.
TEST(OnednnInt8Gemm, SameBitsAsTheScalarPath) {
  for (const W8A8Shape& shape : kShapes) {
    if (shape.N == 0 || shape.K == 0) continue;  // oneDNN wants a weight
    for (bool with_bias : {false, true}) {
      SCOPED_TRACE(describe(shape) + (with_bias ? " bias" : ""));
      const W8A8Problem p(shape, static_cast<uint32_t>(shape.M + shape.N * 3 + with_bias));
      const float* bias = with_bias ? p.bias.data() : nullptr;
      const Int8PackedWeights packed(p.w.data(), shape.N, shape.K, p.ldw, p.w_scale.data());
      const OnednnInt8Weights onednn(p.w.data(), shape.N, shape.K, p.ldw, p.w_scale.data());
      const std::vector<float> expected = p.run(packed, p.a_scale.data(), bias, Int8Isa::kScalar);
      std::vector<float> c(expected.size(), -7.0f);
      onednn_int8_gemm(shape.M, p.a.data(), p.lda, p.a_scale.data(), onednn, bias, c.data(), p.ldc);
      ASSERT_EQ(std::memcmp(c.data(), expected.data(), c.size() * sizeof(float)), 0);
    }
  }
}

TEST(Int8Gemm, BitsDoNotDependOnTheThreadCount) {
  const W8A8Shape shape{37, 300, 200, 0};
  const W8A8Problem p(shape, 11);
  const Int8PackedWeights packed(p.w.data(), shape.N, shape.K, p.ldw, p.w_scale.data());
  const int saved = num_threads();
  for (Int8Isa isa : int8_isa_supported_paths()) {
    set_num_threads(1);
    const std::vector<float> one = p.run(packed, p.a_scale.data(), p.bias.data(), isa);
    set_num_threads(2);
    const std::vector<float> two = p.run(packed, p.a_scale.data(), p.bias.data(), isa);
    EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0) << int8_isa_name(isa);
  }
  set_num_threads(saved);
}

TEST(Int8Gemm, PackingKeepsEveryCodeAndScale) {
  const W8A8Shape shape{1, 21, 13, 2};
  const W8A8Problem p(shape, 3);
  const Int8PackedWeights packed(p.w.data(), shape.N, shape.K, p.ldw, p.w_scale.data());
  for (int64_t n = 0; n < shape.N; ++n) {
    int64_t sum = 0;
    for (int64_t k = 0; k < shape.K; ++k) {
      ASSERT_EQ(packed.at(n, k), p.w[n * p.ldw + k]) << n << ", " << k;
      sum += p.w[n * p.ldw + k];
    }
    EXPECT_EQ(packed.compensation()[n], 128 * sum);
    EXPECT_EQ(packed.scales()[n], p.w_scale[n]);
  }
  EXPECT_THROW((void)packed.at(21, 0), Error);
}

TEST(Int8Gemm, RefusesMinus128AndShortStrides) {
  std::vector<int8_t> w(6, 1);
  w[4] = -128;
  const float scale[2] = {1.0f, 1.0f};
  try {
    const Int8PackedWeights packed(w.data(), 2, 3, 3, scale);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("-128 at channel 1, input 1"), std::string::npos) << e.what();
  }
  w[4] = 1;
  const Int8PackedWeights packed(w.data(), 2, 3, 3, scale);
  std::vector<int8_t> a(3, 1);
  std::vector<float> c(2);
  try {
    int8_gemm(1, a.data(), 2, scale, packed, nullptr, c.data(), 2);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lda=2"), std::string::npos) << e.what();
  }
}

// Quantize, multiply, compare with the float product: the error is what quantization allows,
// sum_k |x_k| dw + |w_k| dx + dx dw with dx <= a_scale / 2, dw <= w_scale / 2 (plus rounding).
TEST(Int8Gemm, QuantizedProductWithinTheQuantizationBound) {
  const int64_t M = 5, N = 70, K = 200;
  std::mt19937 rng(17);
  std::normal_distribution<float> normal;
  std::vector<float> x(M * K), wf(N * K);
  for (float& v : x) v = normal(rng);
  for (float& v : wf) v = 0.05f * normal(rng);
  std::vector<int8_t> xq(M * K), wq(N * K);
  std::vector<float> xs(M), ws(N), c(M * N);
  quantize_rows_int8(x.data(), M, K, K, xq.data(), K, xs.data());
  quantize_rows_int8(wf.data(), N, K, K, wq.data(), K, ws.data());
  const Int8PackedWeights packed(wq.data(), N, K, K, ws.data());
  int8_gemm(M, xq.data(), K, xs.data(), packed, nullptr, c.data(), N);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double exact = 0, bound = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double xv = x[m * K + k], wv = wf[n * K + k];
        exact += xv * wv;
        bound += std::fabs(xv) * ws[n] / 2 + std::fabs(wv) * xs[m] / 2 + xs[m] * ws[n] / 4;
      }
      ASSERT_LE(std::fabs(c[m * N + n] - exact), bound * (1 + 1e-5) + 1e-6) << m << ", " << n;
    }
}

}  // namespace
}  // namespace trident::kernels::cpu
