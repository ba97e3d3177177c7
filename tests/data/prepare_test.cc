// Preparing train.bin / val.bin from text files: documents, separators, the split, errors.
#include "data/prepare.h"

#include <gtest/gtest.h>

#include <cmath>

#include "data/byte_tokenizer.h"
#include "data/tiktoken_ranks.h"
#include "data/test_data.h"
#include "data/token_file.h"

namespace trident::data {
namespace {

using testing::TempDir;
using testing::write_file;

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

std::vector<uint16_t> read_tokens(const testing::fs::path& path) {
  auto file = TokenFile::open(path);
  file.status().throw_if_error();
  return {file.value()->tokens().begin(), file.value()->tokens().end()};
}

TEST(Prepare, ByteTokenizerJoinsDocumentsAndSplitsFromTheEnd) {
  TempDir dir;
  write_file(dir.path() / "a.txt", "abc");
  write_file(dir.path() / "b.txt", "de");
  auto r = prepare_token_files(
      ByteTokenizer(), {{dir.path() / "a.txt", dir.path() / "b.txt"}, dir.path() / "out", 0.4});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r.value().documents, 2);
  EXPECT_EQ(r.value().input_bytes, 5);
  EXPECT_EQ(r.value().train_tokens, 3);
  EXPECT_EQ(r.value().val_tokens, 2);
  EXPECT_EQ(read_tokens(dir.path() / "out" / "train.bin"), (std::vector<uint16_t>{'a', 'b', 'c'}));
  EXPECT_EQ(read_tokens(dir.path() / "out" / "val.bin"), (std::vector<uint16_t>{'d', 'e'}));
}

TEST(Prepare, ValFractionZeroMakesNoValidationSplitAndRemovesAnOldOne) {
  TempDir dir;
  write_file(dir.path() / "a.txt", "abcde");
  auto with_val = prepare_token_files(ByteTokenizer(), {{dir.path() / "a.txt"}, dir.path() / "out", 0.4});
  ASSERT_TRUE(with_val.is_ok()) << with_val.status().to_string();
  ASSERT_TRUE(testing::fs::exists(dir.path() / "out" / "val.bin"));
  auto r = prepare_token_files(ByteTokenizer(), {{dir.path() / "a.txt"}, dir.path() / "out", 0.0});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r.value().train_tokens, 5);
  EXPECT_EQ(r.value().val_tokens, 0);
  EXPECT_TRUE(r.value().val_path.empty());
  EXPECT_TRUE(r.value().removed_old_val);
  EXPECT_FALSE(testing::fs::exists(dir.path() / "out" / "val.bin"));
  EXPECT_EQ(read_tokens(dir.path() / "out" / "train.bin"), (std::vector<uint16_t>{'a', 'b', 'c', 'd', 'e'}));
  // Again: nothing to remove.
  r = prepare_token_files(ByteTokenizer(), {{dir.path() / "a.txt"}, dir.path() / "out", 0.0});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_FALSE(r.value().removed_old_val);
}

TEST(Prepare, Gpt2SeparatesDocumentsWithEndOfText) {
  const Gpt2Tokenizer* gpt2 = testing::shared_gpt2();
  if (gpt2 == nullptr) GTEST_SKIP() << testing::gpt2_missing_message();
  TempDir dir;
  // A literal "<|endoftext|>" inside a document is text, not the separator.
  const std::string one = "Hello world. <|endoftext|> is text here.", two = "Second document.";
  write_file(dir.path() / "1.txt", one);
  write_file(dir.path() / "2.txt", two);
  auto r =
      prepare_token_files(*gpt2, {{dir.path() / "1.txt", dir.path() / "2.txt"}, dir.path(), 0.25});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  std::vector<TokenId> expected = gpt2->encode(one);
  expected.push_back(50256);
  for (TokenId id : gpt2->encode(two)) expected.push_back(id);
  std::vector<uint16_t> got = read_tokens(r.value().train_path);
  const std::vector<uint16_t> val = read_tokens(r.value().val_path);
  got.insert(got.end(), val.begin(), val.end());
  EXPECT_EQ(got, std::vector<uint16_t>(expected.begin(), expected.end()));
  EXPECT_EQ(std::count(got.begin(), got.end(), 50256), 1);
  EXPECT_EQ(r.value().val_tokens, std::llround(0.25 * static_cast<double>(expected.size())));
}

TEST(Prepare, TinyShakespeareGivesTiktokensTokens) {
  const Gpt2Tokenizer* gpt2 = testing::shared_gpt2();
  if (gpt2 == nullptr) GTEST_SKIP() << testing::gpt2_missing_message();
  const auto text = testing::find_shared_file("shakespeare.txt");
  if (!text) GTEST_SKIP() << "shakespeare.txt not found in ../shared/data";
  TempDir dir;
  auto r = prepare_token_files(*gpt2, {{*text}, dir.path(), 0.1});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r.value().train_tokens + r.value().val_tokens, 338025);  // tiktoken's count
  EXPECT_EQ(r.value().val_tokens, 33803);
  auto train = TokenFile::open(r.value().train_path);
  EXPECT_TRUE(train.value()->check_vocab_size(gpt2->vocab_size()).is_ok());
}

TEST(Prepare, ErrorsNameTheFileAndTheProblem) {
  TempDir dir;
  write_file(dir.path() / "ok.txt", "some text");
  write_file(dir.path() / "bad.txt", "caf\xC3");
  const ByteTokenizer bytes;
  auto missing = prepare_token_files(bytes, {{dir.path() / "nope.txt"}, dir.path(), 0.1});
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().kind(), ErrorKind::kIO);
  EXPECT_CONTAINS(missing.status().message(), "nope.txt");
  for (double f : {1.0, -0.5, std::nan("")}) {
    auto r = prepare_token_files(bytes, {{dir.path() / "ok.txt"}, dir.path(), f});
    ASSERT_FALSE(r.is_ok());
    EXPECT_CONTAINS(r.status().message(), "val_fraction must be in [0, 1) (0: no validation split)");
  }
  auto tiny = prepare_token_files(bytes, {{dir.path() / "ok.txt"}, dir.path(), 0.01});
  ASSERT_FALSE(tiny.is_ok());
  EXPECT_CONTAINS(tiny.status().message(), "of 9 tokens leaves val.bin empty");
  EXPECT_CONTAINS(prepare_token_files(bytes, {{}, dir.path(), 0.1}).status().message(),
                  "no input files");

  // A vocabulary too large for uint16 ids writes uint32 files (Note [uint32 token files]) that
  // read back as the same ids.
  class BigTokenizer final : public Tokenizer {
   public:
    void encode_append(std::string_view text, bool, std::vector<TokenId>& out) const override {
      for (unsigned char c : text) out.push_back(70000 + c);
    }
    std::string decode(std::span<const TokenId>) const override { return ""; }
    int64_t vocab_size() const override { return 100277; }
    std::optional<TokenId> eot_id() const override { return std::nullopt; }
    std::string name() const override { return "cl100k"; }
  };
  write_file(dir.path() / "ten.txt", "0123456789");
  auto big = prepare_token_files(BigTokenizer(), {{dir.path() / "ten.txt"}, dir.path() / "big", 0.2});
  ASSERT_TRUE(big.is_ok()) << big.status().message();
  EXPECT_EQ(big.value().bytes_per_token, 4);
  auto train = TokenFile::open(big.value().train_path);
  ASSERT_TRUE(train.is_ok()) << train.status().message();
  EXPECT_EQ(train.value()->bytes_per_token(), 4);
  std::vector<int64_t> ids(8);
  train.value()->read(0, 8, ids.data());
  EXPECT_EQ(ids, (std::vector<int64_t>{70048, 70049, 70050, 70051, 70052, 70053, 70054, 70055}));
  EXPECT_TRUE(train.value()->check_vocab_size(100277).is_ok());
  EXPECT_CONTAINS(train.value()->check_vocab_size(70050).message(), "has id 70050 at position 2");

  const Gpt2Tokenizer* gpt2 = testing::shared_gpt2();
  if (gpt2 == nullptr) return;
  auto invalid = prepare_token_files(
      *gpt2, {{dir.path() / "ok.txt", dir.path() / "bad.txt"}, dir.path(), 0.1});
  ASSERT_FALSE(invalid.is_ok());
  EXPECT_CONTAINS(invalid.status().message(),
                  (dir.path() / "bad.txt").string() +
                      ": GPT-2 tokenizer: the text is not valid UTF-8 at byte offset 3");
}

// cl100k_base (100,277 ids) writes uint32 files that read back as its ids, with <|endoftext|>
// (100257) between documents; War and Peace has ids past 65,535.
TEST(Prepare, Cl100kWritesUint32IdsWithItsEndOfText) {
  const std::optional<testing::fs::path> ranks = testing::find_rank_file("cl100k_base");
  if (!ranks) GTEST_SKIP() << testing::rank_file_missing_message("cl100k_base");
  const std::optional<testing::fs::path> book = testing::find_shared_file("war_and_peace.txt");
  if (!book) GTEST_SKIP() << "war_and_peace.txt not found in ../shared/data";
  auto loaded = load_tiktoken_ranks(*ranks);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  const ByteLevelBpeTokenizer& cl100k = *loaded.value();
  TempDir dir;
  const std::string one = testing::read_file(*book).substr(0, 200000), two = "Second document.";
  write_file(dir.path() / "1.txt", one);
  write_file(dir.path() / "2.txt", two);
  auto r = prepare_token_files(cl100k, {{dir.path() / "1.txt", dir.path() / "2.txt"}, dir.path(), 0.0});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  std::vector<TokenId> expected = cl100k.encode(one);
  expected.push_back(100257);
  for (TokenId id : cl100k.encode(two)) expected.push_back(id);
  auto file = TokenFile::open(r.value().train_path);
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  ASSERT_EQ(file.value()->size(), static_cast<int64_t>(expected.size()));
  std::vector<int64_t> got(expected.size());
  file.value()->read(0, static_cast<int64_t>(got.size()), got.data());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), expected.begin()));
  EXPECT_GT(*std::max_element(expected.begin(), expected.end()), 65535u);
  EXPECT_EQ(testing::read_file(r.value().train_path).substr(0, 8), "TRITOK32");
}

}  // namespace
}  // namespace trident::data
