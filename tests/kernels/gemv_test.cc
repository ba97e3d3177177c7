// Few-row products (kernels/cpu/gemv.h, what gemm takes for M <= kGemvMaxRows: a decode step)
// against a float64 product of the same (rounded) operands: both weight layouts, strided
// operands, alpha and beta (beta = 0 ignores C, even NaN), K and N not multiples of the
// vector width, f32 and bf16. And Note [Row-independent small products]: a row's result is the
// same bits whatever M, the other rows and the thread count.
#include "kernels/cpu/gemv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/parallel.h"
#include "kernels/cpu/matmul.h"

namespace trident::kernels::cpu {
namespace {

struct GemvOperands {
  std::vector<float> a, b, c;  // values exactly representable in the tested type
  int64_t lda, ldb, ldc;
};

template <class T>
std::vector<T> as(const std::vector<float>& v) {
  std::vector<T> out;
  for (float x : v) out.push_back(T(x));
  return out;
}

GemvOperands make(bool trans_b, int64_t M, int64_t N, int64_t K, int64_t pad, bool bf16_values, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  auto value = [&] {
    const float x = normal(gen);
    return bf16_values ? static_cast<float>(bf16(x)) : x;
  };
  GemvOperands o;
  o.lda = K + pad;
  o.ldb = (trans_b ? K : N) + pad;
  o.ldc = N + pad;
  o.a.resize(static_cast<size_t>(M * o.lda));
  o.b.resize(static_cast<size_t>((trans_b ? N : K) * o.ldb));
  o.c.resize(static_cast<size_t>(M * o.ldc));
  for (float* v : {o.a.data(), o.b.data(), o.c.data()})
    for (size_t i = 0, n = v == o.a.data() ? o.a.size() : v == o.b.data() ? o.b.size() : o.c.size(); i < n; ++i)
      v[i] = value();
  return o;
}

// max |got - want| / max |want| over C's (M, N) elements.
double error(const GemvOperands& o, const std::vector<float>& got, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
             float beta) {
  double worst = 0, size = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += static_cast<double>(o.a[static_cast<size_t>(m * o.lda + k)]) *
               o.b[static_cast<size_t>(trans_b ? n * o.ldb + k : k * o.ldb + n)];
      const double want = alpha * acc + (beta == 0 ? 0.0 : beta * static_cast<double>(o.c[static_cast<size_t>(m * o.ldc + n)]));
      worst = std::max(worst, std::abs(got[static_cast<size_t>(m * o.ldc + n)] - want));
      size = std::max(size, std::abs(want));
    }
  return worst / size;
}

TEST(Gemv, MatchesAFloat64Product) {
  struct Case {
    bool trans_b;
    int64_t M, N, K, pad;
    float alpha, beta;
  };
  const Case cases[] = {
      {true, 1, 37, 100, 0, 1.0f, 0.0f},   {false, 1, 37, 100, 0, 1.0f, 0.0f},  {true, 8, 70, 768, 3, 0.5f, 0.0f},
      {false, 8, 600, 300, 5, 1.0f, 1.0f}, {true, 3, 5, 15, 1, 2.0f, -0.5f},    {false, 5, 1300, 17, 0, 1.0f, 0.25f},
      {true, 7, 4, 1, 0, 1.0f, 0.0f},      {false, 2, 1, 9, 2, -1.0f, 0.0f},
      // x W from 4 rows (Note [Rows in registers]): panels, strips and their masked tails
      {false, 4, 2100, 40, 1, 1.0f, 0.0f}, {false, 6, 33, 18, 0, 1.0f, -1.0f}, {false, 7, 5000, 64, 3, 0.5f, 0.0f},
      // x W^T from 5 rows in one pass over B (Note [One pass over B for five to eight rows]):
      // an odd last row of B, a masked tail of k; and past its size limit, the tiles
      {true, 5, 37, 200, 1, 1.0f, 0.5f},   {true, 6, 9, 1025, 0, 1.0f, 0.0f},
  };
  for (const Case& c : cases) {
    const std::string name = std::string(c.trans_b ? "x W^T" : "x W") + " M=" + std::to_string(c.M) +
                             " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K);
    ASSERT_TRUE(gemv_applies(false, c.M, c.K)) << name;
    {
      const GemvOperands o = make(c.trans_b, c.M, c.N, c.K, c.pad, false, 1);
      std::vector<float> got = o.c;
      gemm<float>(false, c.trans_b, c.M, c.N, c.K, c.alpha, o.a.data(), o.lda, o.b.data(), o.ldb, c.beta, got.data(), o.ldc);
      EXPECT_LT(error(o, got, c.trans_b, c.M, c.N, c.K, c.alpha, c.beta), 1e-6) << "f32 " << name;
    }
    {
      const GemvOperands o = make(c.trans_b, c.M, c.N, c.K, c.pad, true, 2);
      const std::vector<bf16> a = as<bf16>(o.a), b = as<bf16>(o.b);
      std::vector<bf16> out = as<bf16>(o.c);
      gemm<bf16>(false, c.trans_b, c.M, c.N, c.K, c.alpha, a.data(), o.lda, b.data(), o.ldb, c.beta, out.data(), o.ldc);
      std::vector<float> got;
      for (bf16 x : out) got.push_back(static_cast<float>(x));
      EXPECT_LT(error(o, got, c.trans_b, c.M, c.N, c.K, c.alpha, c.beta), 8e-3) << "bf16 " << name;  // one rounding
    }
  }
}

TEST(Gemv, BetaZeroIgnoresC) {
  const GemvOperands o = make(true, 2, 20, 30, 0, false, 3);
  std::vector<float> got(o.c.size(), std::numeric_limits<float>::quiet_NaN());
  gemm<float>(false, true, 2, 20, 30, 1.0f, o.a.data(), o.lda, o.b.data(), o.ldb, 0.0f, got.data(), o.ldc);
  EXPECT_LT(error(o, got, true, 2, 20, 30, 1.0f, 0.0f), 1e-6);
}

TEST(Gemv, ARowsBitsDoNotDependOnTheOtherRowsOrTheThreads) {
  const int saved = num_threads();
  for (bool trans_b : {true, false})
    for (int64_t M : {int64_t{4}, int64_t{5}, int64_t{6}, int64_t{8}}) {
      const int64_t N = 3001, K = 700;  // N odd: a last group of one row of B
      const GemvOperands o = make(trans_b, M, N, K, 0, false, 4);
      std::vector<float> batch(o.c.size());
      gemm<float>(false, trans_b, M, N, K, 1.0f, o.a.data(), o.lda, o.b.data(), o.ldb, 0.0f, batch.data(), o.ldc);
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        for (int64_t m : {int64_t{0}, M - 3, M - 1}) {
          std::vector<float> alone(static_cast<size_t>(N));
          gemm<float>(false, trans_b, 1, N, K, 1.0f, o.a.data() + m * o.lda, o.lda, o.b.data(), o.ldb, 0.0f, alone.data(), N);
          EXPECT_EQ(alone, std::vector<float>(batch.begin() + m * o.ldc, batch.begin() + m * o.ldc + N))
              << (trans_b ? "x W^T" : "x W") << " row " << m << " of " << M << " on " << threads << " threads";
        }
      }
    }
  set_num_threads(saved);
}

}  // namespace
}  // namespace trident::kernels::cpu
