// concat and split: error messages, views versus copies, index dtypes, and the gradient of
// a split whose pieces are not all used.
#include <gtest/gtest.h>

#include <vector>

#include "autograd/functions.h"
#include "core/factory.h"
#include "core/views.h"
#include "ops/expect_error.h"
#include "ops/join.h"

namespace trident {
namespace {

TEST(JoinOp, ConcatNamesTheOffendingTensor) {
  expect_error([] { ops::concat({}, 0); }, {"concat", "empty list"});
  expect_error([] { ops::concat({zeros({3, 4}), zeros({3, 2}), zeros({2, 4})}, 1); },
               {"tensor 2 has shape (2, 4)", "tensor 0 has shape (3, 4)", "dim 1"});
  expect_error([] { ops::concat({zeros({3, 4}), zeros({3, 4, 1})}, 0); },
               {"tensor 1 has shape (3, 4, 1) (3 dims)", "(3, 4) (2 dims)"});
  expect_error([] { ops::concat({zeros({2}), zeros({2}, DType::kBF16)}, 0); },
               {"tensor 1 has dtype bf16", "tensor 0 has dtype f32"});
  expect_error([] { ops::concat({zeros({2, 2})}, 2); }, {"concat"});
  expect_error([] { ops::concat({scalar_tensor(1.0)}, 0); }, {"zero-dimensional"});
}

TEST(JoinOp, SplitChecksSizes) {
  const Tensor x = zeros({4, 6});
  expect_error([&] { ops::split(x, std::vector<int64_t>{2, 3}, 1); },
               {"split", "sizes [2, 3] sum to 5", "dim 1", "(4, 6)", "size 6"});
  expect_error([&] { ops::split(x, std::vector<int64_t>{5, -1}, 0); }, {"size -1 at position 1"});
  expect_error([&] { ops::split_chunks(x, 0, 0); }, {"chunk size must be > 0, got 0"});
}

TEST(JoinOp, SplitReturnsViewsAndConcatCopies) {
  const Tensor x = arange(12, DType::kI64);
  const std::vector<Tensor> pieces = ops::split_chunks(views::view(x, {3, 4}), 3, 1);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[1].shape(), (Shape{3, 1}));
  EXPECT_TRUE(pieces[0].shares_storage_with(x));
  const Tensor joined = ops::concat({pieces[1], pieces[0]}, 1);
  EXPECT_FALSE(joined.shares_storage_with(x));
  EXPECT_EQ(to_vector<int64_t>(joined),
            (std::vector<int64_t>{3, 0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10}));
}

TEST(JoinOp, SplitGradientIsZeroWhereAPieceIsUnused) {
  Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {6});
  x.set_requires_grad(true);
  const std::vector<Tensor> pieces = split(x, std::vector<int64_t>{1, 3, 2}, 0);
  autograd::backward({pieces[1]}, {from_vector<float>({7, 8, 9}, {3})});
  EXPECT_EQ(to_vector<float>(*x.grad()), (std::vector<float>{0, 7, 8, 9, 0, 0}));
}

TEST(JoinOp, ConcatGradientReachesOnlyInputsThatNeedIt) {
  Tensor a = from_vector<float>({1, 2}, {1, 2});
  const Tensor b = from_vector<float>({3, 4, 5, 6}, {2, 2});
  a.set_requires_grad(true);
  const Tensor out = concat({b, a}, 0);
  autograd::backward({out}, {from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2})});
  EXPECT_EQ(to_vector<float>(*a.grad()), (std::vector<float>{5, 6}));
  EXPECT_FALSE(b.grad().has_value());
}

}  // namespace
}  // namespace trident
