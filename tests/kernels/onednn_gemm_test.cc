// oneDNN GEMM blocks (src/kernels/cpu/onednn_gemm.h) against a float64 product, and the GEMM
// engine choice (gemm_engine.h). The f32 wrapper runs on every CPU, so its strides, transposes, alpha
// and beta are checked everywhere; bf16 through oneDNN runs only where the CPU has native
// bf16 (AVX512_BF16, AMX) and is skipped, with the CPU's ISA, elsewhere.
#include "kernels/cpu/onednn_gemm.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <tuple>
#include <random>
#include <vector>

#include "core/allocator.h"
#include "core/half.h"
#include "kernels/cpu/gemm_engine.h"
#include "kernels/cpu/matmul.h"

namespace trident::kernels::cpu {
namespace {

struct GemmProblem {
  bool ta, tb;
  int64_t M, N, K;
  int64_t pad;  // extra elements per stored row: leading dims above the row length
  float alpha, beta;
};

std::string describe(const GemmProblem& p) {
  return std::string(p.ta ? "A^T" : "A") + (p.tb ? " B^T" : " B") + " M=" + std::to_string(p.M) +
         " N=" + std::to_string(p.N) + " K=" + std::to_string(p.K) + " pad=" + std::to_string(p.pad) +
         " alpha=" + std::to_string(p.alpha) + " beta=" + std::to_string(p.beta);
}

// GemmOperands stored as the GEMM sees them (transposed ones as (K,M) / (N,K)), values already
// rounded to In, and C's starting values.
template <class In, class Out>
struct GemmOperands {
  int64_t lda, ldb, ldc;
  std::vector<In> a, b;
  std::vector<Out> c;
  std::vector<double> expected;  // alpha * op(A) @ op(B) + beta * C, in float64
  std::vector<double> bound;     // |alpha| * |op(A)| @ |op(B)| + |beta * C|: the error scale

  explicit GemmOperands(const GemmProblem& p, uint32_t seed = 7) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    const int64_t a_rows = p.ta ? p.K : p.M, a_cols = p.ta ? p.M : p.K;
    const int64_t b_rows = p.tb ? p.N : p.K, b_cols = p.tb ? p.K : p.N;
    lda = a_cols + p.pad, ldb = b_cols + p.pad, ldc = p.N + p.pad;
    a.resize(std::max<int64_t>(a_rows * lda, 1));
    b.resize(std::max<int64_t>(b_rows * ldb, 1));
    c.resize(std::max<int64_t>(p.M * ldc, 1));
    for (auto& x : a) x = In(normal(rng));
    for (auto& x : b) x = In(normal(rng));
    for (auto& x : c) x = Out(normal(rng));
    expected.assign(p.M * p.N, 0.0);
    bound.assign(p.M * p.N, 0.0);
    for (int64_t i = 0; i < p.M; ++i)
      for (int64_t j = 0; j < p.N; ++j) {
        double sum = 0, abs_sum = 0;
        for (int64_t k = 0; k < p.K; ++k) {
          const double x = static_cast<float>(p.ta ? a[k * lda + i] : a[i * lda + k]);
          const double y = static_cast<float>(p.tb ? b[j * ldb + k] : b[k * ldb + j]);
          sum += x * y;
          abs_sum += std::abs(x * y);
        }
        const double c0 = p.beta == 0.0f ? 0.0 : static_cast<double>(p.beta) * static_cast<float>(c[i * ldc + j]);
        expected[i * p.N + j] = p.alpha * sum + c0;
        bound[i * p.N + j] = std::abs(p.alpha) * abs_sum + std::abs(c0);
      }
  }

  // Every element of C within tolerance * (K + 2) * bound of float64, and C's padding untouched.
  void expect_result(const GemmProblem& p, const std::vector<Out>& before, double unit_roundoff) const {
    for (int64_t i = 0; i < p.M; ++i) {
      for (int64_t j = 0; j < p.N; ++j) {
        const double got = static_cast<float>(c[i * ldc + j]);
        const double e = expected[i * p.N + j];
        ASSERT_NEAR(got, e, unit_roundoff * (p.K + 2) * (bound[i * p.N + j] + 1e-30))
            << describe(p) << " at (" << i << ", " << j << ")";
      }
      for (int64_t j = p.N; j < ldc; ++j)
        ASSERT_EQ(static_cast<float>(c[i * ldc + j]), static_cast<float>(before[i * ldc + j])) << describe(p) << " padding";
    }
  }
};

std::vector<GemmProblem> problems() {
  std::vector<GemmProblem> out;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t pad : {0, 3}) {
        out.push_back({ta, tb, 37, 53, 29, pad, 1.0f, 0.0f});
        out.push_back({ta, tb, 16, 8, 64, pad, 0.5f, 1.0f});
        out.push_back({ta, tb, 5, 70, 9, pad, 1.0f, 0.25f});
      }
  out.push_back({false, false, 1, 1, 1, 0, 1.0f, 0.0f});
  out.push_back({false, true, 3, 4, 0, 2, 1.0f, 0.5f});  // empty sum: C = beta * C
  out.push_back({true, false, 4, 3, 0, 0, 1.0f, 0.0f});
  return out;
}

template <class In, class Out>
void check_all(double unit_roundoff) {
  for (const GemmProblem& p : problems()) {
    GemmOperands<In, Out> ops(p);
    const std::vector<Out> before = ops.c;
    onednn_gemm_serial<In, Out>(p.ta, p.tb, p.M, p.N, p.K, p.alpha, ops.a.data(), ops.lda, ops.b.data(), ops.ldb,
                                p.beta, ops.c.data(), ops.ldc);
    ops.expect_result(p, before, unit_roundoff);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(OneDnnGemm, F32MatchesFloat64) { check_all<float, float>(std::ldexp(1.0, -24)); }

TEST(OneDnnGemm, Bf16MatchesFloat64WhereTheCpuHasNativeBf16) {
  if (!onednn_has_native_bf16())
    GTEST_SKIP() << "this CPU has no native bf16 (oneDNN's ISA: " << onednn_cpu_isa()
                 << "); oneDNN's bf16 matmul needs AVX512_BF16 or AMX";
  check_all<bf16, float>(std::ldexp(1.0, -24));  // exact products, fp32 sums
  check_all<bf16, bf16>(std::ldexp(1.0, -8));    // and one rounding to bf16
}

TEST(OneDnnGemm, Bf16WithoutNativeSupportIsAClearError) {
  if (onednn_has_native_bf16()) GTEST_SKIP() << "this CPU has native bf16 (" << onednn_cpu_isa() << ")";
  std::vector<bf16> a(4, bf16(1.0f)), b(4, bf16(1.0f));
  std::vector<float> c(4);
  try {
    onednn_gemm_serial<bf16, float>(false, false, 2, 2, 2, 1.0f, a.data(), 2, b.data(), 2, 0.0f, c.data(), 2);
    FAIL() << "a bf16 matmul ran on a CPU that oneDNN says has no native bf16";
  } catch (const std::exception& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("M=2 N=2 K=2"), std::string::npos) << what;
    EXPECT_NE(what.find(onednn_cpu_isa()), std::string::npos) << what;
    EXPECT_NE(what.find("TRIDENT_CPU_BF16_GEMM=widen"), std::string::npos) << what;
  }
}

// "auto": the variable's value where it is set (the ctest runs set it), else by ISA.
GemmEngine auto_engine(GemmType type) {
  const char* env = std::getenv(gemm_engine_variable(type));
  const bool set = env != nullptr && !std::string(env).empty() && std::string(env) != "auto";
  return set ? gemm_engine_from(type, env) : gemm_engine_by_isa(type);
}

TEST(GemmEngine, ValuesOfTheVariables) {
  EXPECT_EQ(gemm_engine_by_isa(GemmType::kBF16), onednn_has_native_bf16() ? GemmEngine::kOneDnn : GemmEngine::kOpenBlas);
  EXPECT_EQ(gemm_engine_by_isa(GemmType::kF32), onednn_has_avx512() ? GemmEngine::kOneDnn : GemmEngine::kOpenBlas);
  EXPECT_EQ(gemm_engine_from(GemmType::kBF16, "widen"), GemmEngine::kOpenBlas);
  EXPECT_EQ(gemm_engine_from(GemmType::kBF16, "auto"), auto_engine(GemmType::kBF16));
  if (onednn_has_native_bf16()) {
    EXPECT_EQ(gemm_engine_from(GemmType::kBF16, "onednn"), GemmEngine::kOneDnn);
  } else {
    try {
      gemm_engine_from(GemmType::kBF16, "onednn");
      FAIL() << "onednn accepted on a CPU without native bf16";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("AVX512_BF16"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(gemm_engine_from(GemmType::kF32, "openblas"), GemmEngine::kOpenBlas);
  EXPECT_EQ(gemm_engine_from(GemmType::kF32, "onednn"), GemmEngine::kOneDnn);
  EXPECT_EQ(gemm_engine_from(GemmType::kF32, "auto"), auto_engine(GemmType::kF32));
  for (const auto& [type, variable, allowed] :
       {std::tuple{GemmType::kBF16, "TRIDENT_CPU_BF16_GEMM=fast", "auto, onednn, widen"},
        std::tuple{GemmType::kF32, "TRIDENT_CPU_F32_GEMM=fast", "auto, onednn, openblas"}}) {
    try {
      gemm_engine_from(type, "fast");
      FAIL() << "an unknown value was accepted";
    } catch (const std::exception& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(variable), std::string::npos) << what;
      EXPECT_NE(what.find(allowed), std::string::npos) << what;
    }
  }
  EXPECT_STREQ(gemm_engine_name(GemmType::kF32, GemmEngine::kOneDnn), "onednn-f32");
  EXPECT_STREQ(gemm_engine_name(GemmType::kBF16, GemmEngine::kOpenBlas), "widened-f32");
  EXPECT_STREQ(gemm_engine_value(GemmType::kBF16, GemmEngine::kOpenBlas), "widen");
  EXPECT_STREQ(gemm_engine_value(GemmType::kF32, GemmEngine::kOpenBlas), "openblas");
  EXPECT_STREQ(gemm_engine_value(GemmType::kF32, GemmEngine::kOneDnn), "onednn");
  // A config key in the message is written as TOML.
  try {
    gemm_engine_from(GemmType::kF32, "fast", "kernels.f32_gemm");
    FAIL() << "an unknown value was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("kernels.f32_gemm = \"fast\""), std::string::npos) << e.what();
  }
}

uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }
uint16_t bits_of(bf16 x) { return x.bits; }

// The public GEMM of T, on whichever engine this process chose for it: several blocks of
// Note [Deterministic GEMM], against float64 within T's rounding, and the same bits with 1
// and 2 threads.
template <class T>
void expect_blocked_product_right_and_thread_count_free(const GemmProblem& p, double unit_roundoff) {
  GemmOperands<T, T> ops(p);
  const std::vector<T> before = ops.c;
  auto run = [&](int threads) {
    std::vector<T> c = before;
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    gemm<T>(p.ta, p.tb, p.M, p.N, p.K, p.alpha, ops.a.data(), ops.lda, ops.b.data(), ops.ldb, p.beta, c.data(), ops.ldc);
    omp_set_num_threads(saved);
    return c;
  };
  ops.c = run(2);
  ops.expect_result(p, before, unit_roundoff);
  const std::vector<T> one_thread = run(1);
  for (size_t i = 0; i < one_thread.size(); ++i)
    ASSERT_EQ(bits_of(one_thread[i]), bits_of(ops.c[i])) << describe(p) << " at " << i;
}

TEST(GemmEngine, F32BlockedProductMatchesFloat64AndIgnoresTheThreadCount) {
  std::cout << "f32 GEMM engine: " << gemm_engine_name(GemmType::kF32, gemm_engine(GemmType::kF32)) << " (oneDNN ISA "
            << onednn_cpu_isa() << ")\n";
  for (const GemmProblem& p : {GemmProblem{false, true, 600, 72, 40, 0, 1.0f, 0.0f}, GemmProblem{true, false, 48, 700, 33, 2, 0.5f, 1.0f},
                           GemmProblem{true, true, 300, 260, 17, 1, 1.0f, 0.25f},
                           // longer than 16 blocks (Note [Long extents]): by columns, by rows
                           GemmProblem{false, true, 24, 4500, 16, 0, 1.0f, 0.0f}, GemmProblem{true, false, 4130, 20, 12, 3, 1.0f, 0.5f}})
    expect_blocked_product_right_and_thread_count_free<float>(p, std::ldexp(1.0, -24));
}

// The block rule, and gemm_on's explicit block (gemm_rates times a part of a long product in
// the whole product's blocks): blocks where it says, each one single-threaded call.
TEST(GemmEngine, AnExplicitBlockSplitsWhereItSays) {
  EXPECT_EQ(gemm_block_extent(4096), kGemmBlock);
  EXPECT_EQ(gemm_block_extent(600), 112);      // 3 blocks become 6 (Note [Even block counts])
  EXPECT_EQ(gemm_block_extent(32000), 2048);   // 16 blocks, a multiple of 64 (Note [Long extents])
  const GemmEngines engines = gemm_engines();
  for (const GemmProblem& p : {GemmProblem{false, true, 600, 72, 40, 0, 1.0f, 0.0f}, GemmProblem{true, false, 48, 700, 33, 2, 0.5f, 1.0f}}) {
    GemmOperands<float, float> ops(p);
    auto product = [&](int64_t block) {
      std::vector<float> c = ops.c;
      gemm_on<float>(engines, p.ta, p.tb, p.M, p.N, p.K, p.alpha, ops.a.data(), ops.lda, ops.b.data(), ops.ldb, p.beta,
                     c.data(), ops.ldc, block);
      return c;
    };
    // The shape's own block is the default's.
    std::vector<float> whole = ops.c;
    gemm<float>(p.ta, p.tb, p.M, p.N, p.K, p.alpha, ops.a.data(), ops.lda, ops.b.data(), ops.ldb, p.beta, whole.data(),
                ops.ldc);
    const bool by_rows = p.M >= p.N;
    const std::vector<float> own = product(gemm_block_extent(by_rows ? p.M : p.N));
    for (size_t i = 0; i < own.size(); ++i) ASSERT_EQ(bits_of(own[i]), bits_of(whole[i])) << describe(p) << " at " << i;
    // Blocks of 100: each the single-threaded product of its rows (columns).
    const std::vector<float> got = product(100);
    std::vector<float> want = ops.c;
    for (int64_t start = 0; start < (by_rows ? p.M : p.N); start += 100) {
      const int64_t len = std::min<int64_t>(100, (by_rows ? p.M : p.N) - start);
      const float* a = by_rows ? (p.ta ? ops.a.data() + start : ops.a.data() + start * ops.lda) : ops.a.data();
      const float* b = by_rows ? ops.b.data() : (p.tb ? ops.b.data() + start * ops.ldb : ops.b.data() + start);
      float* c = want.data() + (by_rows ? start * ops.ldc : start);
      gemm_serial<float>(p.ta, p.tb, by_rows ? len : p.M, by_rows ? p.N : len, p.K, p.alpha, a, ops.lda, b, ops.ldb,
                         p.beta, c, ops.ldc);
    }
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(bits_of(got[i]), bits_of(want[i])) << describe(p) << " at " << i;
  }
  EXPECT_THROW(gemm_on<float>(engines, false, false, 2, 2, 2, 1.0f, nullptr, 2, nullptr, 2, 0.0f, nullptr, 2, -1),
               std::exception);
}

// Both f32 engines in one process, set between products (the ctest runs cover each as the
// process's engine from the start).
TEST(GemmEngine, EachF32EngineSetInOneProcessIgnoresTheThreadCount) {
  const GemmEngines saved = gemm_engines();
  for (const GemmEngine e : {GemmEngine::kOpenBlas, GemmEngine::kOneDnn, GemmEngine::kOpenBlas}) {
    set_gemm_engine(GemmType::kF32, e);
    expect_blocked_product_right_and_thread_count_free<float>(GemmProblem{false, true, 600, 72, 40, 0, 1.0f, 0.0f},
                                                             std::ldexp(1.0, -24));
    expect_blocked_product_right_and_thread_count_free<float>(GemmProblem{true, false, 48, 700, 33, 2, 0.5f, 1.0f},
                                                             std::ldexp(1.0, -24));
  }
  set_gemm_engines(saved);
}

TEST(GemmEngine, Bf16BlockedProductMatchesFloat64AndIgnoresTheThreadCount) {
  std::cout << "bf16 GEMM engine: " << gemm_engine_name(GemmType::kBF16, gemm_engine(GemmType::kBF16)) << " (oneDNN ISA "
            << onednn_cpu_isa() << ")\n";
  for (const GemmProblem& p : {GemmProblem{false, true, 600, 72, 40, 0, 1.0f, 0.0f}, GemmProblem{true, false, 48, 700, 33, 2, 1.0f, 1.0f}}) {
    expect_blocked_product_right_and_thread_count_free<bf16>(p, std::ldexp(1.0, -8));
    // With an f32 result: exact products, f32 sums.
    GemmOperands<bf16, float> ops32(p);
    const std::vector<float> before32 = ops32.c;
    gemm_to_f32<bf16>(p.ta, p.tb, p.M, p.N, p.K, p.alpha, ops32.a.data(), ops32.lda, ops32.b.data(), ops32.ldb, p.beta,
                      ops32.c.data(), ops32.ldc);
    ops32.expect_result(p, before32, std::ldexp(1.0, -24));
  }
}

// What gemm_engine_scratch_bytes reports (the planner's memory model counts it) is what the host
// allocator sees the product take beside its operands, on 1 and 2 threads: a bf16 product split
// by columns into a wider C (Note [oneDNN's scratchpad]) and one split by rows into a dense C.
TEST(GemmEngine, TheEnginesScratchIsWhatTheAllocatorSees) {
  // f32 products and the widening engine take none of oneDNN's scratch.
  const GemmEngines f32_on_onednn{.f32 = GemmEngine::kOneDnn, .bf16 = GemmEngine::kOpenBlas};
  EXPECT_EQ(gemm_engine_scratch_bytes<float>(f32_on_onednn, 2, false, true, 96, 4500, 32, 32, 32, 4500), 0);
  EXPECT_EQ(gemm_engine_scratch_bytes<bf16>(GemmEngines{}, 2, false, true, 96, 4500, 32, 32, 32, 4500), 0);
  if (!onednn_has_native_bf16()) {
    GTEST_SKIP() << "this CPU has no native bf16 (oneDNN's ISA: " << onednn_cpu_isa()
                 << "): bf16 products widen to f32 copies, which the planner counts on its own";
  }
  const GemmEngines engines{.f32 = GemmEngine::kOneDnn, .bf16 = GemmEngine::kOneDnn};
  Allocator& host = host_allocator();
  const auto activations = [&] { return host.stats().category(MemoryCategory::kActivation); };
  for (const GemmProblem& p : {GemmProblem{false, true, 96, 4500, 32, 0, 1.0f, 0.0f}, GemmProblem{false, true, 600, 72, 40, 0, 1.0f, 0.0f}})
    for (int64_t one_thread = 0; const int threads : {1, 2}) {
      SCOPED_TRACE(describe(p) + " threads=" + std::to_string(threads));
      GemmOperands<bf16, bf16> ops(p);
      const int saved = omp_get_max_threads();
      omp_set_num_threads(threads);
      const int64_t predicted =
          gemm_engine_scratch_bytes<bf16>(engines, threads, p.ta, p.tb, p.M, p.N, p.K, ops.lda, ops.ldb, ops.ldc, p.beta);
      host.reset_peak_stats();
      const int64_t before = activations().current;
      gemm_on<bf16>(engines, p.ta, p.tb, p.M, p.N, p.K, p.alpha, ops.a.data(), ops.lda, ops.b.data(), ops.ldb, p.beta,
                    ops.c.data(), ops.ldc);
      const int64_t measured = activations().peak - before;
      omp_set_num_threads(saved);
      // The wide product's blocks (by columns, 18 of 256) each hold an f32 (M, 256) product.
      if (p.N > p.M) {
        EXPECT_GE(predicted, int64_t{4} * p.M * 256);
      }
      // On one thread exactly; on two, both threads' blocks at once unless the machine's load
      // kept one thread from starting until the other had finished.
      if (threads == 1) {
        EXPECT_EQ(predicted, measured);
        one_thread = predicted;
      } else {
        EXPECT_EQ(predicted, 2 * one_thread);
        EXPECT_LE(measured, predicted);
        EXPECT_GE(measured, one_thread);
      }
    }
}

}  // namespace
}  // namespace trident::kernels::cpu
