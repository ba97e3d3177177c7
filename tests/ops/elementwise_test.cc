// ops::add_ with operands of different dtypes (Note [Mixed-dtype add_] in ops/elementwise.cc):
// the bits of adding the cast operand, a bounded conversion buffer, and its errors.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/allocator.h"
#include "core/copy.h"
#include "core/device.h"
#include "core/factory.h"
#include "core/rng.h"
#include "core/views.h"
#include "ops/elementwise.h"
#include "ops/expect_error.h"
#include "support/emulated_device.h"

namespace trident {
namespace {

// a += b both ways: mixed (b as it is) and by hand (b cast to a's dtype first).
void expect_same_as_cast(const Tensor& a, const Tensor& b) {
  const Tensor mixed = core::contiguous(a), by_hand = core::contiguous(a);
  ops::add_(mixed, b);
  ops::add_(by_hand, core::cast(b, a.dtype()));
  EXPECT_EQ(to_vector<float>(core::cast(mixed, DType::kF32)), to_vector<float>(core::cast(by_hand, DType::kF32)));
}

// Rows of 1000: more than one slice (1048 rows each), the last one short.
TEST(MixedAdd, GivesTheBitsOfAddingTheCastOperand) {
  Generator gen(3);
  const int64_t rows = 2 * (ops::kMixedAddSliceElements / 1000) + 7;
  const Tensor a = randn({rows, 1000}, gen);
  expect_same_as_cast(a, randn({rows, 1000}, gen, DType::kBF16));
  expect_same_as_cast(a, randn({rows, 1000}, gen, DType::kF16));
  expect_same_as_cast(a, randn({1000}, gen, DType::kBF16));                          // broadcast
  expect_same_as_cast(randn({rows, 1000}, gen, DType::kBF16), randn({rows, 1000}, gen));  // rounds into bf16
  expect_same_as_cast(randn({5, 7}, gen, DType::kF64), randn({5, 7}, gen, DType::kBF16));  // one slice
  expect_same_as_cast(randn({}, gen), randn({}, gen, DType::kBF16));                     // 0-dim
  // A flat view, as ZeRO folds into its buffer: rows of one element.
  expect_same_as_cast(views::view(a, {a.numel()}), views::view(randn({rows, 1000}, gen, DType::kBF16), {a.numel()}));
}

TEST(MixedAdd, ConvertsOneSliceAtATime) {
  Generator gen(4);
  const int64_t rows = 4 * ops::kMixedAddSliceElements / 512;
  const Tensor a = randn({rows, 512}, gen), b = randn({rows, 512}, gen, DType::kBF16);
  Allocator& host = host_allocator();
  const int64_t before = host.stats().in_use.current;
  host.reset_peak_stats();
  ops::add_(a, b);
  const int64_t extra = host.stats().in_use.peak - before;
  // A whole cast would be 16 MiB here.
  EXPECT_LE(extra, ops::kMixedAddSliceElements * 4) << "peak bytes above the operands while adding";
  EXPECT_GT(extra, 0);
}

TEST(MixedAdd, RunsOnTheDeviceAsOnTheHost) {
  Generator gen(5);
  const int64_t rows = ops::kMixedAddSliceElements / 300 + 3;
  const Tensor a = randn({rows, 300}, gen), b = randn({rows, 300}, gen, DType::kBF16);
  const Device dev = testing::emulated_device();
  const Tensor on_dev = core::to_device(a, dev);
  ops::add_(on_dev, core::to_device(b, dev));
  ops::add_(a, b);
  EXPECT_EQ(to_vector<float>(a), to_vector<float>(on_dev));
}

TEST(MixedAdd, RejectsIntegersAndMixedDevices) {
  expect_error([] { ops::add_(zeros({3}), from_vector<int64_t>({1, 2, 3}, {3})); },
               {"add_", "expected a floating tensor", "i64"});
  expect_error([] { ops::add_(from_vector<int64_t>({1, 2, 3}, {3}), zeros({3})); },
               {"add_", "expected a floating tensor"});
  const Device dev = testing::emulated_device();
  expect_error([&] { ops::add_(zeros({3}), core::to_device(zeros({3}, DType::kBF16), dev)); }, {"add_"});
  expect_error([] { ops::add_(zeros({3}), zeros({4}, DType::kBF16)); }, {"(4,)", "(3,)"});
}

}  // namespace
}  // namespace trident
