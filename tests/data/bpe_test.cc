// tiktoken's merge rule (Note [tiktoken's merge rule]): the concatenation rule, the whole-piece
// shortcut, leftmost ties, and the heap implementation against the linear one.
#include "data/bpe.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "data/test_data.h"

namespace trident::data {
namespace {

using testing::parse_tiny;
using testing::tiny_vocab;
using Bounds = std::vector<size_t>;

TEST(BytePairEncoder, JoinsLowestRankFirstAndLeftmostOnTies) {
  const BpeVocab v = parse_tiny(tiny_vocab({{"a", "a"}, {"b", "c"}, {"a", "b"}}));
  const BytePairEncoder bpe(v);
  EXPECT_EQ(bpe.merge_linear("aaa"), (Bounds{0, 2, 3}));  // "aa" + "a", not "a" + "aa"
  EXPECT_EQ(bpe.merge_linear("abc"), (Bounds{0, 1, 3}));  // "bc" (rank 1) before "ab" (rank 2)
  EXPECT_EQ(bpe.merge_linear("x"), (Bounds{0, 1}));
  std::vector<TokenId> ids;
  bpe.encode("abc", ids);
  EXPECT_EQ(ids, (std::vector<TokenId>{'a', 256 + 1}));
}

TEST(BytePairEncoder, JoinsAnyAdjacentPartsWhoseBytesAreAToken) {
  // "abc" is made by "ab" + "c", but the parts reached are "a" + "bc": tiktoken joins them
  // anyway, because it looks up the concatenated bytes, not the pair.
  const BpeVocab v = parse_tiny(tiny_vocab({{"b", "c"}, {"a", "b"}, {"ab", "c"}}));
  const BytePairEncoder bpe(v);
  EXPECT_EQ(bpe.merge_linear("abcx"), (Bounds{0, 3, 4}));
  EXPECT_EQ(bpe.merge_heap("abcx"), (Bounds{0, 3, 4}));
}

TEST(BytePairEncoder, APieceThatIsATokenIsEncodedWhole) {
  // Merging "xyzw" stops at x + yz + w, but the piece itself is a token.
  const BpeVocab v = parse_tiny(tiny_vocab({{"y", "z"}, {"x", "y"}, {"z", "w"}, {"xy", "zw"}}));
  const BytePairEncoder bpe(v);
  EXPECT_EQ(bpe.merge_linear("xyzw"), (Bounds{0, 1, 3, 4}));
  std::vector<TokenId> ids;
  bpe.encode("xyzw", ids);
  EXPECT_EQ(ids, (std::vector<TokenId>{256 + 3}));
  ASSERT_NE(bpe.find_token("xyzw"), nullptr);
  EXPECT_EQ(bpe.find_token("<|endoftext|>"), nullptr);  // special tokens are not mergeable
}

// Random merges over a 3-letter alphabet, random strings: both implementations agree.
TEST(BytePairEncoder, HeapAndLinearMergesAgree) {
  std::mt19937 rng(42);
  std::vector<std::string> tokens = {"a", "b", "c"};
  std::vector<std::pair<std::string, std::string>> merges;
  std::set<std::string> made(tokens.begin(), tokens.end());
  while (merges.size() < 60) {
    const std::string& l = tokens[rng() % tokens.size()];
    const std::string& r = tokens[rng() % tokens.size()];
    if (l.size() + r.size() > 12 || made.contains(l + r)) continue;
    merges.emplace_back(l, r);
    made.insert(l + r);
    tokens.push_back(l + r);
  }
  const BpeVocab v = parse_tiny(tiny_vocab(merges));
  const BytePairEncoder bpe(v);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string s(1 + rng() % 300, 'a');
    for (char& ch : s) ch = static_cast<char>('a' + rng() % 3);
    ASSERT_EQ(bpe.merge_linear(s), bpe.merge_heap(s)) << s;
  }
}

TEST(BytePairEncoder, HeapAndLinearMergesAgreeOnGpt2) {
  const Gpt2Tokenizer* gpt2 = testing::shared_gpt2();
  if (gpt2 == nullptr) GTEST_SKIP() << testing::gpt2_missing_message();
  auto vocab = load_gpt2_vocab(*testing::find_gpt2_dir());
  const BytePairEncoder bpe(vocab.value());
  std::mt19937 rng(7);
  const std::string alphabet = "etaoinshrdlucmfwypvbgkqjxz";
  for (int trial = 0; trial < 300; ++trial) {
    std::string s(1 + rng() % 400, 'a');
    for (char& ch : s) ch = alphabet[std::min<size_t>(rng() % 40, alphabet.size() - 1)];
    ASSERT_EQ(bpe.merge_linear(s), bpe.merge_heap(s)) << s;
  }
}

}  // namespace
}  // namespace trident::data
