// The sequential sampler's definition (issue #3) against a transcription of the PyTorch
// formula, and the random sampler's determinism, range and resumption.
#include "data/sampler.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>

#include "core/check.h"
#include "core/factory.h"
#include "data/test_data.h"

namespace trident::data {
namespace {

// Tokens whose value is their position (mod 2^16), so a window shows where it came from.
std::shared_ptr<const TokenFile> counting_file(int64_t n) {
  std::vector<uint16_t> tokens(static_cast<size_t>(n));
  std::iota(tokens.begin(), tokens.end(), uint16_t{0});
  return TokenFile::from_tokens(std::move(tokens), "counting.bin");
}

std::vector<int64_t> row(const Tensor& t, int64_t b) {
  const std::vector<int64_t> all = to_vector<int64_t>(t);
  const int64_t T = t.shape()[1];
  return {all.begin() + b * T, all.begin() + (b + 1) * T};
}

TEST(SequentialSampler, FollowsTheIssuesDefinitionIncludingTheWrap) {
  const int64_t N = 23, B = 3, T = 4;  // W = (23 - 1) / 4 = 5 windows
  auto file = counting_file(N);
  SequentialSampler sampler(file, B, T);
  EXPECT_EQ(sampler.num_windows(), 5);
  for (int64_t s = 0; s < 12; ++s) {
    const Batch batch = sampler.next();
    EXPECT_EQ(batch.inputs.shape(), (Shape{B, T}));
    EXPECT_EQ(batch.inputs.dtype(), DType::kI64);
    EXPECT_EQ(batch.targets.dtype(), DType::kI64);
    for (int64_t b = 0; b < B; ++b) {
      // W = (len(tokens) - 1) // T; r = (s*B + b) % W
      // x = tokens[r*T : r*T+T]; y = tokens[r*T+1 : r*T+T+1]
      const int64_t r = (s * B + b) % 5;
      std::vector<int64_t> x, y;
      for (int64_t t = 0; t < T; ++t) {
        x.push_back(r * T + t);
        y.push_back(r * T + t + 1);
      }
      EXPECT_EQ(row(batch.inputs, b), x) << "step " << s << " row " << b;
      EXPECT_EQ(row(batch.targets, b), y) << "step " << s << " row " << b;
    }
  }
  EXPECT_EQ(sampler.position(), 12);
  // Step 1 straddles the end: rows 3, 4, then window 0 again.
  EXPECT_EQ(row(sampler.batch_at(1).inputs, 2), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(SequentialSampler, EveryTokenButTheFirstIsATargetOncePerPass) {
  const int64_t N = 1 + 7 * 16, T = 16;  // exactly 7 windows, nothing left over
  SequentialSampler sampler(counting_file(N), 1, T);
  std::vector<int> seen(N, 0);
  for (int64_t s = 0; s < sampler.num_windows(); ++s)
    for (int64_t v : to_vector<int64_t>(sampler.next().targets)) ++seen[v];
  EXPECT_EQ(seen[0], 0);
  for (int64_t i = 1; i < N; ++i) EXPECT_EQ(seen[i], 1) << i;
}

TEST(SequentialSampler, HugeStepsDoNotOverflow) {
  SequentialSampler sampler(counting_file(101), 7, 10);  // W = 10
  const int64_t s = (int64_t{1} << 62) / 3;
  const int64_t r = static_cast<int64_t>((static_cast<__int128>(s) * 7 + 2) % 10);
  EXPECT_EQ(row(sampler.batch_at(s).inputs, 2)[0], r * 10);
}

// B and T come from flags: a product past int64 wrapped into a small buffer that the sampler
// overran (SIGSEGV), and one past the machine's memory failed inside the allocator.
TEST(BatchSampler, ABatchLargerThanMemoryIsRefusedNamingItsSizes) {
  for (const int64_t B : {int64_t{1} << 59, int64_t{1} << 40}) {
    try {
      RandomSampler sampler(counting_file(101), B, 32, 1);
      FAIL() << B;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("a batch of B=" + std::to_string(B) + " sequences of T=32 tokens"),
                std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("more than this machine's memory"), std::string::npos) << e.what();
    }
  }
}

TEST(RandomSampler, IsDeterministicInSeedAndPosition) {
  auto file = counting_file(1000);
  RandomSampler a(file, 4, 8, 1337), b(file, 4, 8, 1337), c(file, 4, 8, 1338);
  for (int i = 0; i < 5; ++i) {
    const Batch x = a.next(), y = b.next(), z = c.next();
    EXPECT_EQ(to_vector<int64_t>(x.inputs), to_vector<int64_t>(y.inputs));
    EXPECT_NE(to_vector<int64_t>(x.inputs), to_vector<int64_t>(z.inputs));
    // Each row is a window: consecutive tokens, target = input shifted by one.
    for (int64_t r = 0; r < 4; ++r) {
      const std::vector<int64_t> in = row(x.inputs, r), out = row(x.targets, r);
      for (int64_t t = 0; t < 8; ++t) {
        EXPECT_EQ(in[t], in[0] + t);
        EXPECT_EQ(out[t], in[t] + 1);
      }
    }
  }
}

TEST(RandomSampler, ResumesExactlyFromASavedState) {
  auto file = counting_file(5000);
  RandomSampler straight(file, 3, 16, 99);
  std::vector<std::vector<int64_t>> expected;
  for (int i = 0; i < 10; ++i) expected.push_back(to_vector<int64_t>(straight.next().inputs));

  RandomSampler first(file, 3, 16, 99);
  for (int i = 0; i < 6; ++i) (void)first.next();
  const SamplerState saved = first.state();
  EXPECT_EQ(saved.seed, 99u);
  EXPECT_EQ(saved.position, 6);

  RandomSampler resumed(file, 3, 16, /*seed=*/0);
  resumed.restore(saved);
  for (int i = 6; i < 10; ++i) EXPECT_EQ(to_vector<int64_t>(resumed.next().inputs), expected[i]);
  EXPECT_THROW(resumed.restore({99, -1}), Error);
}

TEST(RandomSampler, DrawsEveryValidOffsetUniformly) {
  const int64_t N = 12, T = 4;  // offsets 0..7
  RandomSampler sampler(counting_file(N), 16, T, 5);
  std::map<int64_t, int> count;
  for (int i = 0; i < 1000; ++i) {
    const std::vector<int64_t> in = to_vector<int64_t>(sampler.next().inputs);
    for (int64_t b = 0; b < 16; ++b) ++count[in[b * T]];
  }
  ASSERT_EQ(count.size(), 8u);
  EXPECT_EQ(count.begin()->first, 0);
  EXPECT_EQ(count.rbegin()->first, N - T - 1);
  for (const auto& [offset, n] : count) EXPECT_NEAR(n, 2000, 200) << "offset " << offset;
}

TEST(Samplers, RefuseFilesShorterThanOneWindow) {
  auto file = counting_file(8);
  try {
    SequentialSampler(file, 2, 8);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("token file counting.bin has 8 tokens, fewer than one window of "
                               "T + 1 = 9 tokens"),
              std::string::npos)
        << e.message();
  }
  EXPECT_NO_THROW(SequentialSampler(file, 2, 7));
  EXPECT_THROW(RandomSampler(file, 2, 8, 0), Error);
  EXPECT_THROW(SequentialSampler(file, 0, 4), Error);
}

TEST(Samplers, ReadMemoryMappedFiles) {
  testing::TempDir dir;
  std::vector<uint16_t> tokens(300);
  std::iota(tokens.begin(), tokens.end(), uint16_t{1000});
  ASSERT_TRUE(write_token_file(dir.path() / "train.bin", tokens).is_ok());
  auto file = TokenFile::open(dir.path() / "train.bin");
  ASSERT_TRUE(file.is_ok());
  SequentialSampler sampler(file.value(), 2, 10);
  EXPECT_EQ(row(sampler.batch_at(0).targets, 1),
            (std::vector<int64_t>{1011, 1012, 1013, 1014, 1015, 1016, 1017, 1018, 1019, 1020}));
}

}  // namespace
}  // namespace trident::data
