// Cross-entropy front end: error messages for bad targets, and the semantics the op suite
// cannot check by finite differences (every row ignored, mean versus sum on known values).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "autograd/functions.h"
#include "core/factory.h"
#include "ops/expect_error.h"
#include "ops/loss.h"
#include "core/copy.h"
#include "core/rng.h"
#include "support/emulated_device.h"

namespace trident {
namespace {

// The emulated device keeps the host's logits layout by default (support/emulated_device.h):
// with rows padded to 8, oneDNN picks another bf16 kernel for an odd vocabulary (V = 4099
// here) and the bits differ. Unpadded, the device's loss and gradients are the host's.
TEST(CrossEntropyOp, LinearCrossEntropyOnTheEmulatedDeviceGivesTheHostBits) {
  Generator gen(11);
  const Tensor x = core::cast(randn({64, 96}, gen), DType::kBF16), w = core::cast(randn({4099, 96}, gen), DType::kBF16);
  std::vector<int64_t> ids(64);
  for (int64_t i = 0; i < 64; ++i) ids[static_cast<size_t>(i)] = (i * 977) % 4099;
  const Tensor targets = from_vector<int64_t>(ids, {64});
  const auto host = ops::linear_cross_entropy(x, w, targets, -1, Reduction::kMean, true, true);
  const Device dev = testing::emulated_device();
  const auto on_dev = ops::linear_cross_entropy(core::to_device(x, dev), core::to_device(w, dev),
                                                core::to_device(targets, dev), -1, Reduction::kMean, true, true);
  EXPECT_EQ(to_vector<float>(host.loss), to_vector<float>(on_dev.loss));
  EXPECT_EQ(to_vector<float>(*host.dx), to_vector<float>(*on_dev.dx));
  EXPECT_EQ(to_vector<float>(*host.dw), to_vector<float>(*on_dev.dw));
}

TEST(CrossEntropyOp, OutOfRangeTargetNamesValuePositionAndClasses) {
  const Tensor logits = zeros({2, 3, 5});
  const Tensor targets = from_vector<int64_t>({0, 4, -1, 2, 7, 9}, {2, 3});
  expect_error([&] { ops::cross_entropy(logits, targets, -1, Reduction::kMean); },
               {"cross_entropy", "target 7", "position (1, 1)", "5 classes", "0 <= target < 5",
                "ignore_index = -1"});
  const Tensor negative = from_vector<int32_t>({1, -3}, {2});
  expect_error(
      [&] {
        ops::cross_entropy(zeros({2, 5}), negative, -100, Reduction::kSum);
      },
      {"target -3", "position (1,)", "ignore_index = -100"});
}

TEST(CrossEntropyOp, RejectsMismatchedOrNonIntegerTargets) {
  expect_error(
      [&] {
        ops::cross_entropy(zeros({4, 5}), from_vector<int64_t>({0, 1, 2}, {3}), -1,
                           Reduction::kMean);
      },
      {"cross_entropy", "targets of shape (3,)", "logits (4, 5)", "(4,)"});
  expect_error(
      [&] {
        ops::cross_entropy(zeros({4, 5}), zeros({4}), -1, Reduction::kMean);
      },
      {"cross_entropy", "i32, i64 or u16", "f32"});
  expect_error(
      [&] {
        ops::cross_entropy(zeros({4, 0}), from_vector<int64_t>({0, 0, 0, 0}, {4}), -1,
                           Reduction::kMean);
      },
      {"cross_entropy", "no classes"});
}

TEST(CrossEntropyOp, FlattenedTargetsAreAccepted) {
  const Tensor logits = zeros({2, 3, 4});
  const Tensor flat = from_vector<int64_t>({0, 1, 2, 3, 0, 1}, {6});
  EXPECT_NEAR(ops::cross_entropy(logits, flat, -1, Reduction::kMean).loss.item(), std::log(4.0),
              1e-6);
}

// Uniform logits over V = 4: every counted row loses log 4 and has gradient
// (1/4 - onehot) * g / count (mean) or * g (sum); the ignored row contributes nothing.
TEST(CrossEntropyOp, IgnoredRowsAreNeitherSummedNorCounted) {
  const Tensor targets = from_vector<int64_t>({1, -1, 2}, {3});
  for (Reduction reduction : {Reduction::kMean, Reduction::kSum}) {
    Tensor logits = zeros({3, 4});
    logits.set_requires_grad(true);
    const Tensor loss = cross_entropy(logits, targets, -1, reduction);
    const bool mean = reduction == Reduction::kMean;
    EXPECT_NEAR(loss.item(), (mean ? 1.0 : 2.0) * std::log(4.0), 1e-6);
    autograd::backward(loss);
    const double scale = mean ? 0.5 : 1.0;
    const std::vector<double> want = {
        0.25 * scale, -0.75 * scale, 0.25 * scale,  0.25 * scale, 0, 0, 0, 0,
        0.25 * scale, 0.25 * scale,  -0.75 * scale, 0.25 * scale};
    const std::vector<double> got = to_vector<double>(*logits.grad());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-7) << i;
  }
}

// As in PyTorch: a mean over no counted rows is NaN; the gradient is zero.
TEST(CrossEntropyOp, EveryRowIgnoredGivesNanMeanAndZeroGradient) {
  Tensor logits = ones({2, 3});
  logits.set_requires_grad(true);
  const Tensor targets = from_vector<int32_t>({-1, -1}, {2});
  const Tensor loss = cross_entropy(logits, targets);
  EXPECT_TRUE(std::isnan(loss.item()));
  autograd::backward(loss);
  EXPECT_EQ(to_vector<float>(*logits.grad()), std::vector<float>(6, 0.0f));
  EXPECT_EQ(cross_entropy(logits, targets, -1, Reduction::kSum).item(), 0.0);
}

}  // namespace
}  // namespace trident
