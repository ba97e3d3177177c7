// Front-end errors of the pointwise and softmax ops (ops/pointwise.h, ops/softmax.h), and
// the special values the op suite's random inputs never reach: infinities, NaN, overflow,
// subnormals, masked (-inf) logits, and the exponent-0 gradient at x = 0.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "autograd/functions.h"
#include "core/factory.h"
#include "ops/expect_error.h"
#include "ops/pointwise.h"
#include "ops/softmax.h"

namespace trident {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

Tensor f32(const std::vector<float>& values) {
  return from_vector(values, Shape{static_cast<int64_t>(values.size())});
}

// The f32 results of fn on `in`, checked against `want` (NaN matches NaN, zeros match
// either sign).
void expect_values(const std::function<Tensor(const Tensor&)>& fn, const std::vector<float>& in,
                   const std::vector<float>& want, float rel = 1e-6f) {
  const std::vector<float> got = to_vector<float>(fn(f32(in)));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i]) || std::isinf(want[i]) || want[i] == 0.0f) {
      EXPECT_TRUE(std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i])
          << "at x = " << in[i] << ": expected " << want[i] << ", got " << got[i];
    } else {
      EXPECT_NEAR(got[i], want[i], rel * std::fabs(want[i])) << "at x = " << in[i];
    }
  }
}

TEST(PointwiseErrors, RejectIntegerTensorsNamingTheOp) {
  expect_error([] { trident::exp(arange(4)); }, ErrorKind::kType, {"exp", "i64", "floating"});
  expect_error([] { trident::pow(arange(4), 2.0); }, ErrorKind::kType, {"pow", "i64"});
  expect_error([] { trident::gelu_tanh(arange(4)); }, ErrorKind::kType, {"gelu_tanh", "i64"});
}

TEST(PointwiseErrors, BackwardChecksGradAgainstTheSavedTensor) {
  expect_error(
      [] {
        ops::tanh_backward(zeros({2, 3}), zeros({3, 2}));
      },
      ErrorKind::kValue, {"tanh_backward", "grad shape (2, 3)", "output shape (3, 2)"});
  expect_error([] { ops::gelu_backward(zeros({4}, DType::kBF16), zeros({4})); }, ErrorKind::kType,
               {"gelu_backward", "grad dtype bf16", "input dtype f32"});
}

TEST(SoftmaxErrors, DimOutOfRangeNamesTheAllowedRange) {
  expect_error(
      [] {
        trident::softmax(zeros({2, 3}), 2);
      },
      ErrorKind::kIndex, {"softmax", "dim 2", "2 dims", "-2 to 1"});
  expect_error(
      [] {
        trident::log_softmax(zeros({2, 3}), -3);
      },
      ErrorKind::kIndex, {"log_softmax", "dim -3"});
}

TEST(SoftmaxErrors, RejectsIntegersAndMismatchedGrad) {
  expect_error([] { trident::softmax(arange(5)); }, ErrorKind::kType, {"softmax", "i64"});
  expect_error(
      [] {
        ops::softmax_backward(zeros({2, 3}), zeros({2, 4}), -1);
      },
      ErrorKind::kValue, {"softmax_backward", "(2, 3)", "(2, 4)"});
}

TEST(PointwiseSpecialValues, ExpAndLogAtTheEdgesOfTheirRange) {
  auto exp = [](const Tensor& x) { return trident::exp(x); };
  expect_values(exp, {-kInf, -110.0f, 0.0f, 89.0f, kInf, kNaN},
                {0.0f, 0.0f, 1.0f, kInf, kInf, kNaN});
  // e^-100 is subnormal in float: it must not be flushed to zero.
  expect_values(exp, {-100.0f, 88.5f},
                {static_cast<float>(std::exp(-100.0)), static_cast<float>(std::exp(88.5))}, 1e-5f);
  auto log = [](const Tensor& x) { return trident::log(x); };
  expect_values(log, {0.0f, -1.0f, kInf, kNaN, 1e-45f, 3e38f},
                {-kInf, kNaN, kInf, kNaN, static_cast<float>(std::log(1e-45f)),
                 static_cast<float>(std::log(3e38))});
}

TEST(PointwiseSpecialValues, ActivationsSaturate) {
  expect_values([](const Tensor& x) { return trident::tanh(x); }, {-kInf, -20.0f, 20.0f, kInf},
                {-1.0f, -1.0f, 1.0f, 1.0f});
  for (auto fn : {+[](const Tensor& x) { return trident::gelu(x); },
                  +[](const Tensor& x) { return trident::gelu_tanh(x); }})
    expect_values(fn, {-30.0f, 30.0f, 1e30f}, {0.0f, 30.0f, 1e30f});
  expect_values([](const Tensor& x) { return trident::silu(x); }, {-200.0f, 200.0f},
                {0.0f, 200.0f});
}

TEST(PointwiseSpecialValues, PowHandlesSignsZeroAndTheZeroExponent) {
  expect_values([](const Tensor& x) { return trident::pow(x, 3.0); }, {-2.0f, 0.5f},
                {-8.0f, 0.125f});
  expect_values([](const Tensor& x) { return trident::pow(x, -1.0); }, {0.0f, -4.0f},
                {kInf, -0.25f});
  expect_values([](const Tensor& x) { return trident::pow(x, 0.5); }, {-1.0f, 4.0f}, {kNaN, 2.0f});
  // d x^0 / dx is 0 everywhere, also where x^-1 is infinite.
  const Tensor x = f32({0.0f, -3.0f});
  EXPECT_EQ(to_vector<float>(ops::pow_backward(ones({2}), x, 0.0)),
            (std::vector<float>{0.0f, 0.0f}));
}

TEST(SoftmaxSpecialValues, MaskedLogitsGetZeroProbability) {
  const Tensor x = from_vector<float>({0.0f, -kInf, 1.0f, 2.0f}, Shape{2, 2});
  const std::vector<float> p = to_vector<float>(trident::softmax(x, -1));
  EXPECT_EQ(p[0], 1.0f);
  EXPECT_EQ(p[1], 0.0f);
  const std::vector<float> lp = to_vector<float>(trident::log_softmax(x, 0));  // columns
  EXPECT_EQ(lp[1], -kInf);
  EXPECT_EQ(lp[3], 0.0f);
  EXPECT_NEAR(lp[0], -std::log1p(std::exp(1.0f)), 1e-6f);
  // Equal huge logits: the max subtraction keeps exp finite.
  const std::vector<float> even = to_vector<float>(trident::softmax(f32({3e38f, 3e38f})));
  EXPECT_EQ(even, (std::vector<float>{0.5f, 0.5f}));
}

}  // namespace
}  // namespace trident
