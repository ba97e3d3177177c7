// Rotary position embedding front end: error messages, a piece of a sequence rotated from its
// own first position equals that piece of the whole sequence's rotation (what sequence
// parallelism and cached decoding rely on), and the inverse undoes the rotation.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/factory.h"
#include "core/rng.h"
#include "core/views.h"
#include "ops/expect_error.h"
#include "ops/rope.h"

namespace trident {
namespace {

TEST(RopeOps, BadInputsAreNamed) {
  expect_error([] { ops::rope(zeros({2, 3, 5}), 10000.0, 0); }, {"rope", "(B, T, heads, head_size)", "(2, 3, 5)"});
  expect_error([] { ops::rope(zeros({1, 2, 3, 5}), 10000.0, 0); }, {"rope", "head_size must be even", "5"});
  expect_error([] { ops::rope(zeros({1, 2, 3, 4}), 1.0, 0); }, {"rope", "theta", "> 1", "1"});
  expect_error([] { ops::rope(zeros({1, 2, 3, 4}), 10000.0, -2); }, {"rope", "first position", "-2"});
  expect_error(
      [] {
        RopeParams p(500000.0);
        p.factor = 8.0;
        p.low_freq_factor = 4.0;
        p.high_freq_factor = 1.0;
        ops::rope(zeros({1, 2, 3, 4}), p, 0);
      },
      {"rope", "Llama 3 scaling", "low_freq_factor 4", "high_freq_factor 1"});
  expect_error([] { ops::rope(zeros({1, 2, 3, 4}, DType::kI64), 10000.0, 0); }, {"rope", "i64"});
}

TEST(RopeOps, APieceFromItsOwnPositionMatchesTheWholeSequence) {
  Generator gen(7);
  const Tensor x = randn({2, 40, 3, 16}, gen);
  const std::vector<float> whole = to_vector<float>(views::narrow(ops::rope(x, 500000.0, 100), 1, 25, 15));
  const std::vector<float> piece =
      to_vector<float>(ops::rope(core::contiguous(views::narrow(x, 1, 25, 15)), 500000.0, 125));
  EXPECT_EQ(whole, piece);  // bit for bit: the same angles, the same products
}

TEST(RopeOps, TheInverseUndoesTheRotation) {
  Generator gen(3);
  const Tensor x = randn({1, 9, 2, 8}, gen);
  const std::vector<float> back = to_vector<float>(ops::rope(ops::rope(x, 10000.0, 4000), 10000.0, 4000, true));
  const std::vector<float> orig = to_vector<float>(x);
  for (size_t i = 0; i < orig.size(); ++i) EXPECT_NEAR(back[i], orig[i], 1e-5) << i;
}

}  // namespace
}  // namespace trident
