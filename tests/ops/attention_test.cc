// Attention front end: error messages, the tokens-first output layout, and memory: the
// forward must never allocate a (T, T) score matrix. Values and gradients are checked by
// the op suite (tests/op_suite/cases_attention.cc).
#include <gtest/gtest.h>

#include <cmath>

#include "core/allocator.h"
#include "core/copy.h"
#include "core/kernel_switches.h"
#include "core/factory.h"
#include "core/rng.h"
#include "core/views.h"
#include "ops/attention.h"
#include "ops/expect_error.h"
#include "kernels/cpu/attention_bf16_tile.h"

namespace trident {
namespace {

TEST(AttentionOps, ShapeMismatchesNameTheShapes) {
  const Tensor q = zeros({2, 4, 5, 8}), kv = zeros({2, 2, 5, 8});
  expect_error([&] { ops::attention(zeros({4, 5, 8}), kv, kv, true); },
               {"attention", "q (B, NH, T, HS)", "(4, 5, 8)"});
  expect_error([&] { ops::attention(q, kv, zeros({2, 2, 5, 4}), true); },
               {"attention", "k (2, 2, 5, 8)", "v (2, 2, 5, 4)", "same shape"});
  expect_error([&] { ops::attention(q, zeros({2, 3, 5, 8}), zeros({2, 3, 5, 8}), true); },
               {"attention", "NKV=3", "must divide", "NH=4"});
  expect_error([&] { ops::attention(q, zeros({2, 2, 6, 8}), zeros({2, 2, 6, 8}), true); },
               {"attention", "(2, 4, 5, 8)", "(2, 2, 6, 8)", "sequence lengths"});
  expect_error([&] { ops::attention(q, zeros({2, 2, 5, 16}), zeros({2, 2, 5, 16}), true); },
               {"attention", "head sizes"});
  expect_error([&] { ops::attention(q, zeros({1, 2, 5, 8}), zeros({1, 2, 5, 8}), true); },
               {"attention", "batch sizes"});
}

TEST(AttentionOps, RejectsBadDtypesAndScale) {
  const Tensor q = zeros({1, 2, 3, 4}), kv = zeros({1, 2, 3, 4});
  expect_error([&] { ops::attention(q, zeros({1, 2, 3, 4}, DType::kBF16), kv, true); },
               {"attention", "f32", "bf16"});
  expect_error([&] { ops::attention(zeros({1, 2, 3, 4}, DType::kI64), kv, kv, true); },
               {"attention", "floating", "i64"});
  expect_error([&] { ops::attention(q, kv, kv, true, std::nan("")); },
               {"attention", "scale must be finite"});
  expect_error([&] { ops::attention(q, kv, kv, true, std::nullopt, ops::AttentionOutputLayout::kHeadsFirst, -3); },
               {"attention", "sliding window", "-3"});
  expect_error([&] { ops::attention(q, kv, kv, false, std::nullopt, ops::AttentionOutputLayout::kHeadsFirst, 4); },
               {"attention", "sliding window (4 keys)", "causal"});
}

TEST(AttentionOps, BackwardChecksItsSavedTensors) {
  const Tensor q = zeros({1, 2, 3, 4}), kv = zeros({1, 2, 3, 4});
  const ops::AttentionForward f = ops::attention(q, kv, kv, true);
  expect_error([&] { ops::attention_backward(zeros({1, 2, 3, 5}), q, kv, kv, f.out, f.lse, true); },
               {"attention_backward", "dout (1, 2, 3, 5)", "q's shape (1, 2, 3, 4)"});
  expect_error([&] { ops::attention_backward(f.out, q, kv, kv, f.out, zeros({1, 2, 4}), true); },
               {"attention_backward", "lse", "(1, 2, 3)", "(1, 2, 4)"});
  expect_error(
      [&] { ops::attention_backward(f.out, q, kv, kv, f.out, zeros({1, 2, 3}, DType::kF64), true); },
      {"attention_backward", "lse", "f32", "f64"});
}

TEST(AttentionOps, TokensFirstOutputMergesHeadsWithoutACopy) {
  Generator gen(7);
  const Tensor q = randn({2, 3, 5, 4}, gen), k = randn({2, 3, 5, 4}, gen), v = randn({2, 3, 5, 4}, gen);
  const Tensor heads_first = ops::attention(q, k, v, true).out;
  const Tensor tokens_first =
      ops::attention(q, k, v, true, std::nullopt, ops::AttentionOutputLayout::kTokensFirst).out;
  EXPECT_TRUE(heads_first.is_contiguous());
  EXPECT_EQ(tokens_first.shape(), Shape({2, 3, 5, 4}));
  EXPECT_TRUE(views::transpose(tokens_first, 1, 2).is_contiguous());
  EXPECT_EQ(to_vector<float>(heads_first), to_vector<float>(tokens_first));
}

// The point of the tiled kernels: memory linear in T. The forward holds its output (T * HS),
// the logsumexp (T) and a few 64-row tiles per thread; the backward its three gradients and,
// per thread, at most five (T, HS) accumulators. A (T, T) f32 score matrix would be 16 MiB.
TEST(AttentionOps, NeverAllocatesTheScoreMatrix) {
  const int64_t T = 2048, HS = 64;
  const int64_t scores_bytes = T * T * static_cast<int64_t>(sizeof(float));
  Generator gen(3);
  const Tensor q = randn({1, 1, T, HS}, gen), k = randn({1, 1, T, HS}, gen), v = randn({1, 1, T, HS}, gen);
  const Tensor dout = randn({1, 1, T, HS}, gen);
  Allocator& alloc = host_allocator();

  alloc.reset_peak_stats();
  int64_t before = alloc.stats().in_use.current;
  const ops::AttentionForward f = ops::attention(q, k, v, true);
  const int64_t forward_peak = alloc.stats().in_use.peak - before;
  EXPECT_LT(forward_peak, scores_bytes / 16) << "forward peak " << forward_peak << " bytes";

  alloc.reset_peak_stats();
  before = alloc.stats().in_use.current;
  const ops::AttentionGrads g = ops::attention_backward(dout, q, k, v, f.out, f.lse, true);
  const int64_t backward_peak = alloc.stats().in_use.peak - before;
  EXPECT_LT(backward_peak, scores_bytes / 2) << "backward peak " << backward_peak << " bytes";
}

// kernels.cpu_bf16_attention picks how bf16 attention multiplies (Note [bf16 tile products]):
// bf16 tiles by vdpbf16ps where the build has it, else f32 tiles. Both must match the f32
// computation on the same (bf16-representable) values within the op suite's bf16 tolerance,
// 8 u (|r| + sqrt(T) rms(r)), at a shape with a partial tile, padded head columns, GQA and a
// window; and where the build has the instruction the two settings must be two paths (other
// bits). The op suite checks the default path against float64 and finite differences.
TEST(AttentionOps, Bf16TilesAndF32TilesBothMatchTheF32Result) {
  struct RestoreSwitch {
    ~RestoreSwitch() { set_kernel_switch(KernelSwitch::kCpuBf16Attention, true); }
  } restore;
  const int64_t T = 150, HS = 24;
  Generator gen(11);
  auto bf16_values = [&](Shape shape) { return core::cast(core::cast(randn(shape, gen), DType::kBF16), DType::kF32); };
  const Tensor q = bf16_values({1, 4, T, HS}), k = bf16_values({1, 2, T, HS}), v = bf16_values({1, 2, T, HS});
  const Tensor dout = bf16_values({1, 4, T, HS});
  for (const int64_t window : {int64_t{0}, int64_t{40}}) {
    SCOPED_TRACE("window " + std::to_string(window));
    const ops::AttentionForward ref = ops::attention(q, k, v, true, std::nullopt, ops::AttentionOutputLayout::kHeadsFirst, window);
    const ops::AttentionGrads ref_g = ops::attention_backward(dout, q, k, v, ref.out, ref.lse, true, std::nullopt, window);
    std::vector<std::vector<float>> results[2];
    for (const bool bf16_tiles : {false, true}) {
      set_kernel_switch(KernelSwitch::kCpuBf16Attention, bf16_tiles);
      auto b = [](const Tensor& t) { return core::cast(t, DType::kBF16); };
      const ops::AttentionForward f = ops::attention(b(q), b(k), b(v), true, std::nullopt, ops::AttentionOutputLayout::kHeadsFirst, window);
      const ops::AttentionGrads g = ops::attention_backward(b(dout), b(q), b(k), b(v), f.out, f.lse, true, std::nullopt, window);
      const std::pair<Tensor, Tensor> pairs[] = {{f.out, ref.out}, {g.dq, ref_g.dq}, {g.dk, ref_g.dk}, {g.dv, ref_g.dv}};
      const char* names[] = {"out", "dq", "dk", "dv"};
      for (int i = 0; i < 4; ++i) {
        const std::vector<float> got = to_vector<float>(core::cast(pairs[i].first, DType::kF32));
        const std::vector<float> want = to_vector<float>(pairs[i].second);
        double sum_sq = 0;
        for (float w : want) sum_sq += double(w) * w;
        const double rms = std::sqrt(sum_sq / double(want.size())), u = 0x1p-8;
        int64_t bad = 0;
        for (size_t j = 0; j < want.size(); ++j)
          bad += std::fabs(got[j] - want[j]) > 8 * u * (std::fabs(want[j]) + std::sqrt(double(T)) * rms);
        EXPECT_EQ(bad, 0) << names[i] << " with bf16 tiles " << bf16_tiles;
        results[bf16_tiles].push_back(got);
      }
    }
#if TRIDENT_ATTENTION_BF16_DOT
    if (__builtin_cpu_supports("avx512bf16")) {
      EXPECT_NE(results[0], results[1]) << "the switch changed nothing";
    }
#endif
  }
}

}  // namespace
}  // namespace trident
