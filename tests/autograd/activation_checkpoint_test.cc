// Activation checkpointing beyond what the op suite checks: parameters captured by the
// region (not passed as inputs), dropout inside the region, bitwise equality with the plain
// graph under both policies, the memory it saves, and the grad-ready hooks of captured
// parameters.
#include "autograd/functions/activation_checkpoint.h"

#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "core/allocator.h"
#include "core/factory.h"
#include "core/rng.h"

namespace trident {
namespace {

Tensor random_param(const Shape& shape, Generator& g) {
  Tensor t = randn(shape, g) * 0.2;
  t.set_requires_grad(true);
  return t;
}

struct Weights {
  Generator g;
  Tensor w1, b1, w2;
  explicit Weights(int64_t C, uint64_t seed = 7)
      : g(seed),
        w1(random_param({4 * C, C}, g)),
        b1(random_param({4 * C}, g)),
        w2(random_param({C, 4 * C}, g)) {}
};

// A residual MLP block with dropout; the weights are captured, not inputs.
Tensor block(const Weights& w, const Tensor& x, Generator* gen) {
  Tensor h = gelu_tanh(linear(layernorm(x), w.w1, w.b1));
  if (gen != nullptr) h = dropout(h, 0.25, *gen);
  return x + linear(h, w.w2);
}

struct RunResult {
  std::vector<float> out, dx, dw1, db1, dw2;
  uint64_t rng_offset_after = 0;
};

// Two blocks in a row, checkpointed or not, then backward of a weighted sum.
RunResult run(bool checkpointed, RecomputePolicy policy, bool with_dropout) {
  const int64_t C = 16;
  Weights a(C, 7), b(C, 8);
  Generator data(3);
  Tensor x = randn({3, 10, C}, data);
  x.set_requires_grad(true);
  Generator drop(11);
  Generator* gen = with_dropout ? &drop : nullptr;
  Tensor y = x;
  for (const Weights* w : {&a, &b}) {
    if (checkpointed) {
      y = activation_checkpoint([w, gen](const TensorList& in) { return block(*w, in[0], gen); }, {y}, policy, gen);
    } else {
      y = block(*w, y, gen);
    }
  }
  const Tensor probe = randn(y.shape(), data);
  autograd::backward(sum(y * probe));
  return {to_vector<float>(y), to_vector<float>(*x.grad()), to_vector<float>(*a.w1.grad()),
          to_vector<float>(*a.b1.grad()), to_vector<float>(*b.w2.grad()), drop.offset()};
}

void expect_bitwise_equal(const RunResult& a, const RunResult& b) {
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.dx, b.dx);
  EXPECT_EQ(a.dw1, b.dw1);
  EXPECT_EQ(a.db1, b.db1);
  EXPECT_EQ(a.dw2, b.dw2);
  EXPECT_EQ(a.rng_offset_after, b.rng_offset_after);
}

TEST(Checkpoint, FullRecomputeIsBitwiseThePlainGraph) {
  expect_bitwise_equal(run(false, RecomputePolicy::kEverything, false),
                       run(true, RecomputePolicy::kEverything, false));
}

TEST(Checkpoint, SelectiveRecomputeIsBitwiseThePlainGraph) {
  expect_bitwise_equal(run(false, RecomputePolicy::kEverything, false),
                       run(true, RecomputePolicy::kAllButMatmuls, false));
}

TEST(Checkpoint, DropoutMasksAreRedrawnIdenticallyInTheRerun) {
  const RunResult plain = run(false, RecomputePolicy::kEverything, true);
  expect_bitwise_equal(plain, run(true, RecomputePolicy::kEverything, true));
  expect_bitwise_equal(plain, run(true, RecomputePolicy::kAllButMatmuls, true));
  EXPECT_GT(plain.rng_offset_after, 0u);
}

TEST(Checkpoint, ParametersGetGradientsWhenNoInputNeedsOne) {
  Weights w(8);
  Generator g(1);
  const Tensor x = randn({4, 8}, g);  // no gradient wanted for x
  const Tensor y = activation_checkpoint([&w](const TensorList& in) { return block(w, in[0], nullptr); }, {x});
  autograd::backward(sum(y));
  ASSERT_TRUE(w.w1.grad().has_value());
  ASSERT_TRUE(w.w2.grad().has_value());
  Weights ref(8);
  autograd::backward(sum(block(ref, x, nullptr)));
  EXPECT_EQ(to_vector<float>(*w.w1.grad()), to_vector<float>(*ref.w1.grad()));
}

TEST(Checkpoint, GradReadyHooksOfCapturedParametersFire) {
  Weights w(8);
  int fired = 0;
  autograd::register_grad_ready_hook(w.w2, [&](const Tensor&) { ++fired; });
  Generator g(1);
  Tensor x = randn({4, 8}, g);
  x.set_requires_grad(true);
  autograd::backward(sum(activation_checkpoint([&w](const TensorList& in) { return block(w, in[0], nullptr); }, {x})));
  EXPECT_EQ(fired, 1);
}

TEST(Checkpoint, OutsideGradModeItIsThePlainFunction) {
  Weights w(8);
  Generator g(1);
  const Tensor x = randn({4, 8}, g);
  autograd::NoGradGuard no_grad;
  const Tensor y = activation_checkpoint([&w](const TensorList& in) { return block(w, in[0], nullptr); }, {x});
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(to_vector<float>(y), to_vector<float>(block(w, x, nullptr)));
}

// Bytes held between forward and backward by a stack of blocks: the plain graph keeps every
// intermediate; full recompute only each block's input; selective also the products' outputs.
int64_t held_bytes(bool checkpointed, RecomputePolicy policy) {
  const int64_t C = 32, L = 6;
  std::vector<Weights> ws;
  for (int64_t i = 0; i < L; ++i) ws.emplace_back(C, 20 + static_cast<uint64_t>(i));
  Generator g(5);
  Tensor x = randn({8, 64, C}, g);
  x.set_requires_grad(true);
  const int64_t before = host_allocator().stats().in_use.current;
  Tensor y = x;
  for (const Weights& w : ws)
    y = checkpointed ? activation_checkpoint([&w](const TensorList& in) { return block(w, in[0], nullptr); }, {y}, policy)
                     : block(w, y, nullptr);
  const int64_t held = host_allocator().stats().in_use.current - before;
  autograd::backward(sum(y));
  return held;
}

TEST(Checkpoint, KeepsLessBetweenForwardAndBackward) {
  const int64_t plain = held_bytes(false, RecomputePolicy::kEverything);
  const int64_t selective = held_bytes(true, RecomputePolicy::kAllButMatmuls);
  const int64_t full = held_bytes(true, RecomputePolicy::kEverything);
  const int64_t activation = 8 * 64 * 32 * 4;  // one (B,T,C) f32 tensor
  // Plain per block: the input, the norm output, the 4C pre-GELU and post-GELU values, the
  // output... Full: each block's output (the next block's input) only.
  EXPECT_LE(full, 6 * activation + 4096);
  // Selective keeps the 4C product output and the C output per block, but not the norm
  // output or the GELU output.
  EXPECT_LT(selective, plain);
  EXPECT_LE(selective, 6 * 6 * activation + 4096);
  EXPECT_GE(plain, 6 * 10 * activation);
}

}  // namespace
}  // namespace trident
