// The fused SwiGLU gate (ops/swiglu.h): in f32 its forward and both gradients are bit for bit
// those of silu then mul, the ops it replaces in LLaMA's MLP (so f32 training is unchanged);
// front-end errors name the shapes. Values against float64 and finite differences: the op
// suite (tests/op_suite/cases_swiglu.cc).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "autograd/functions.h"
#include "core/factory.h"
#include "core/rng.h"
#include "ops/expect_error.h"
#include "ops/swiglu.h"

namespace trident {
namespace {

void expect_same_bits(const Tensor& a, const Tensor& b, const char* what) {
  const std::vector<float> x = to_vector<float>(a), y = to_vector<float>(b);
  ASSERT_EQ(x.size(), y.size()) << what;
  EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0) << what;
}

TEST(Swiglu, F32IsSiluThenMulBitForBit) {
  Generator gen(7);
  // More than one parallel chunk, gate values into silu's tails.
  const Tensor g0 = randn({67, 509}, gen) * 4.0, u0 = randn({67, 509}, gen), dh = randn({67, 509}, gen);
  auto leaf = [](const Tensor& t) { return detach(t).set_requires_grad(true); };
  Tensor g1 = leaf(g0), u1 = leaf(u0), g2 = leaf(g0), u2 = leaf(u0);
  const Tensor fused = swiglu(g1, u1), unfused = silu(g2) * u2;
  expect_same_bits(fused, unfused, "forward");
  autograd::backward({fused}, {dh});
  autograd::backward({unfused}, {dh});
  expect_same_bits(*g1.grad(), *g2.grad(), "gate gradient");
  expect_same_bits(*u1.grad(), *u2.grad(), "up gradient");
}

TEST(Swiglu, FrontEndErrors) {
  expect_error([] { ops::swiglu(zeros({2, 3}), zeros({3, 2})); }, {"swiglu", "2, 3", "3, 2"});
  expect_error([] { ops::swiglu(zeros({2}), zeros({2}, DType::kBF16)); }, {"swiglu"});
  expect_error([] { ops::swiglu_backward(zeros({4}), zeros({2, 2}), zeros({2, 2})); }, {"swiglu_backward", "grad"});
}

}  // namespace
}  // namespace trident
