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
  expect_error(
      [] {
        ops::rope(zeros({2, 3, 5}), 10000.0, 0);
      },
      {"rope", "(B, T, heads, head_size)", "(2, 3, 5)"});
  expect_error(
      [] {
        ops::rope(zeros({1, 2, 3, 5}), 10000.0, 0);
      },
      {"rope", "head_size must be even", "5"});
  expect_error([] { ops::rope(zeros({1, 2, 3, 4}), 1.0, 0); }, {"rope", "theta", "> 1", "1"});
  expect_error(
      [] {
        ops::rope(zeros({1, 2, 3, 4}), 10000.0, -2);
      },
      {"rope", "first position", "-2"});
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

// From a small position and from one in the tens of thousands.
TEST(RopeOps, APieceFromItsOwnPositionMatchesTheWholeSequence) {
  Generator gen(7);
  const Tensor x = randn({2, 40, 3, 16}, gen);
  for (const int64_t start : {100, 40000}) {
    const std::vector<float> whole =
        to_vector<float>(views::narrow(ops::rope(x, 500000.0, start), 1, 25, 15));
    const std::vector<float> piece =
        to_vector<float>(ops::rope(core::contiguous(views::narrow(x, 1, 25, 15)), 500000.0, start + 25));
    EXPECT_EQ(whole, piece) << "from " << start;  // bit for bit: the same angles, the same products
  }
}

// Given positions, each token turns by its own position's angle whichever table the kernel
// builds (one row per position up to the largest, or, when the tokens are fewer, as at decode,
// one row per token): bit for bit the rotation of each token from its own first position.
TEST(RopeOps, GivenPositionsMatchEachTokensOwnRotation) {
  Generator gen(5);
  for (const std::vector<int64_t>& pos :
       {std::vector<int64_t>{3, 0, 2, 1}, std::vector<int64_t>{4000, 17, 0, 131071}}) {
    const Tensor x = randn({2, 2, 3, 16}, gen);
    for (const bool inverse : {false, true}) {
      const std::vector<float> got =
          to_vector<float>(ops::rope(x, RopeParams(500000.0), from_vector(pos, {2, 2}), inverse));
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t t = 0; t < 2; ++t) {
          const Tensor token = core::contiguous(views::narrow(views::narrow(x, 0, b, 1), 1, t, 1));
          const std::vector<float> want = to_vector<float>(
              ops::rope(token, RopeParams(500000.0), pos[static_cast<size_t>(b * 2 + t)], inverse));
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_EQ(got[static_cast<size_t>((b * 2 + t) * 48) + i], want[i])
                << "position " << pos[static_cast<size_t>(b * 2 + t)] << ", element " << i;
        }
    }
  }
}

TEST(RopeOps, TheInverseUndoesTheRotation) {
  Generator gen(3);
  const Tensor x = randn({1, 9, 2, 8}, gen);
  const std::vector<float> back =
      to_vector<float>(ops::rope(ops::rope(x, 10000.0, 4000), 10000.0, 4000, true));
  const std::vector<float> orig = to_vector<float>(x);
  for (size_t i = 0; i < orig.size(); ++i) EXPECT_NEAR(back[i], orig[i], 1e-5) << i;
}

// Note [RoPE's table per thread]: a call served by the table an earlier call left (longer, or
// the other direction's) gives the bits of one that builds its own; other frequencies or
// first positions in between are not mistaken for it.
TEST(RopeOps, AReusedTableGivesTheSameBits) {
  Generator gen(11);
  const Tensor x = randn({1, 6, 2, 8}, gen), longer = randn({1, 50, 2, 8}, gen);
  for (const bool inverse : {false, true}) {
    (void)ops::rope(x, 123.0, 7, !inverse);  // a table of other frequencies
    const std::vector<float> first = to_vector<float>(ops::rope(x, 10000.0, 3, inverse));
    (void)ops::rope(longer, 10000.0, 3, !inverse);  // a longer table from the same position, the other way
    EXPECT_EQ(to_vector<float>(ops::rope(x, 10000.0, 3, inverse)), first);
    (void)ops::rope(longer, 10000.0, 4, inverse);  // from another position
    EXPECT_EQ(to_vector<float>(ops::rope(x, 10000.0, 3, inverse)), first);
    (void)ops::rope(longer, 500000.0, 3, inverse);  // another base
    EXPECT_EQ(to_vector<float>(ops::rope(x, 10000.0, 3, inverse)), first);
  }
}

}  // namespace
}  // namespace trident
