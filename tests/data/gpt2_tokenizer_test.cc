// GPT-2 tokenizer against OpenAI's tiktoken: the golden strings and corpora of
// tiktoken_gpt2_golden.json (made by tiktoken_golden.mjs), round trips, special tokens,
// invalid input, both file layouts, long pieces, concurrent use.
#include "data/gpt2_tokenizer.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "data/test_data.h"
#include "data/utf8.h"

namespace trident::data {
namespace {

using testing::find_shared_file;
using testing::Fnv1a64;
using testing::shared_gpt2;

#define REQUIRE_GPT2()                       \
  const Gpt2Tokenizer* gpt2 = shared_gpt2(); \
  if (gpt2 == nullptr) GTEST_SKIP() << testing::gpt2_missing_message()

const nlohmann::json& golden() {
  static const nlohmann::json g = nlohmann::json::parse(testing::read_file(testing::golden_path()));
  return g;
}

using testing::escaped;
using testing::ids_hash;

TEST(Gpt2Tokenizer, GoldenFileHasTheRequiredCoverage) {
  const nlohmann::json& g = golden();
  EXPECT_EQ(g["encoding"], "gpt2");
  EXPECT_GE(g["cases"].size(), 60u);
  EXPECT_EQ(g["corpora"].size(), 2u);
}

TEST(Gpt2Tokenizer, MatchesTiktokenOnTheGoldenStrings) {
  REQUIRE_GPT2();
  int checked = 0;
  for (const auto& c : golden()["cases"]) {
    const std::string text = c["text"];
    const bool allow_special = c["allow_special"];
    const std::vector<TokenId> expected = c["ids"].get<std::vector<TokenId>>();
    const std::vector<TokenId> got = gpt2->encode(text, allow_special);
    EXPECT_EQ(got, expected) << "text \"" << escaped(text) << "\" allow_special=" << allow_special;
    EXPECT_EQ(gpt2->decode(got), text) << "text \"" << escaped(text) << "\"";
    ++checked;
  }
  EXPECT_GE(checked, 60);
}

// The whole corpus: same file as the golden was made from, same token count, same ids (by
// hash), and an exact round trip.
void check_corpus(const Gpt2Tokenizer& gpt2, const std::string& name) {
  const std::optional<testing::fs::path> path = find_shared_file(name);
  if (!path) GTEST_SKIP() << name << " not found in ../shared/data";
  nlohmann::json entry;
  for (const auto& c : golden()["corpora"])
    if (c["file"] == name) entry = c;
  ASSERT_FALSE(entry.is_null()) << name << " is not in the golden file";
  const std::string text = testing::read_file(*path);
  Fnv1a64 text_hash;
  text_hash.update(text.data(), text.size());
  ASSERT_EQ(text.size(), entry["bytes"].get<size_t>()) << *path << " differs from the golden's";
  ASSERT_EQ(text_hash.hex(), entry["bytes_fnv1a64"]) << *path << " differs from the golden's";
  const std::vector<TokenId> ids = gpt2.encode(text);
  EXPECT_EQ(ids.size(), entry["tokens"].get<size_t>()) << "token count of " << name;
  EXPECT_EQ(ids_hash(ids), entry["ids_fnv1a64"]) << "ids of " << name;
  EXPECT_TRUE(gpt2.decode(ids) == text) << name << " does not round-trip";
}

TEST(Gpt2Tokenizer, TinyShakespeareMatchesTiktokenAndRoundTrips) {
  REQUIRE_GPT2();
  check_corpus(*gpt2, "shakespeare.txt");
}

TEST(Gpt2Tokenizer, WarAndPeaceMatchesTiktokenAndRoundTrips) {
  REQUIRE_GPT2();
  check_corpus(*gpt2, "war_and_peace.txt");
}

TEST(Gpt2Tokenizer, EndOfTextIsSpecialOnlyWhenAllowed) {
  REQUIRE_GPT2();
  ASSERT_TRUE(gpt2->eot_id().has_value());
  EXPECT_EQ(*gpt2->eot_id(), 50256u);
  EXPECT_EQ(gpt2->vocab_size(), 50257);
  EXPECT_EQ(gpt2->encode("<|endoftext|>", true), std::vector<TokenId>{50256});
  const std::vector<TokenId> plain = gpt2->encode("<|endoftext|>", false);
  EXPECT_GT(plain.size(), 1u);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 50256u), 0);
  EXPECT_EQ(gpt2->decode(std::vector<TokenId>{50256}), "<|endoftext|>");
}

TEST(Gpt2Tokenizer, InvalidUtf8IsAnErrorNamingTheByteOffset) {
  REQUIRE_GPT2();
  try {
    (void)gpt2->encode("Hello, w\xC3(rld");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kValue);
    EXPECT_NE(e.message().find("not valid UTF-8 at byte offset 8"), std::string::npos)
        << e.message();
    EXPECT_NE(e.message().find("0xC3"), std::string::npos) << e.message();
  }
  // Surrogates, overlong forms and values above U+10FFFF are invalid too (tiktoken's str
  // cannot hold them).
  EXPECT_THROW((void)gpt2->encode("\xED\xA0\x80"), Error);
  EXPECT_THROW((void)gpt2->encode("\xC0\xAF"), Error);
  EXPECT_THROW((void)gpt2->encode("\xF4\x90\x80\x80"), Error);
}

TEST(Gpt2Tokenizer, DecodeRejectsIdsOutsideTheVocabulary) {
  REQUIRE_GPT2();
  try {
    (void)gpt2->decode(std::vector<TokenId>{15496, 50257});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIndex);
    EXPECT_NE(e.message().find("id 50257 at position 1"), std::string::npos) << e.message();
  }
}

TEST(Gpt2Tokenizer, DecodeReturnsTheExactBytesOfPartialCharacters) {
  REQUIRE_GPT2();
  // An emoji is several byte tokens; decoding a prefix gives its leading bytes, not U+FFFD.
  const std::vector<TokenId> ids = gpt2->encode("\xF0\x9F\x98\x80");
  ASSERT_GT(ids.size(), 1u);
  std::string joined;
  for (TokenId id : ids) joined += gpt2->decode(std::vector<TokenId>{id});
  EXPECT_EQ(joined, "\xF0\x9F\x98\x80");
}

TEST(Gpt2Tokenizer, RandomUnicodeTextRoundTrips) {
  REQUIRE_GPT2();
  std::mt19937 rng(1234);
  // Code points from the ASCII, Latin, CJK and emoji ranges, and whitespace.
  const std::pair<uint32_t, uint32_t> ranges[] = {{0x20, 0x7E},       {0x09, 0x0D},
                                                  {0xA0, 0x24F},      {0x4E00, 0x4FFF},
                                                  {0x1F600, 0x1F64F}, {0x1, 0x10FFFF}};
  for (int trial = 0; trial < 200; ++trial) {
    std::string text;
    const int len = static_cast<int>(rng() % 200);
    for (int k = 0; k < len; ++k) {
      const auto& [lo, hi] = ranges[rng() % std::size(ranges)];
      uint32_t cp = lo + rng() % (hi - lo + 1);
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
      append_utf8(text, cp);
    }
    EXPECT_EQ(gpt2->decode(gpt2->encode(text)), text) << escaped(text);
  }
}

TEST(Gpt2Tokenizer, LongPiecesEncodeInLinearishTime) {
  REQUIRE_GPT2();
  // One piece of 256K letters: the linear merge would take minutes (it is quadratic).
  std::string letters(1 << 18, 'a');
  std::mt19937 rng(5);
  std::string mixed;
  for (int i = 0; i < (1 << 18); ++i) mixed.push_back(static_cast<char>('a' + rng() % 26));
  for (const std::string* text : {&letters, &mixed}) {
    const std::vector<TokenId> ids = gpt2->encode(*text);
    EXPECT_LT(ids.size(), text->size());
    EXPECT_TRUE(gpt2->decode(ids) == *text);
  }
}

TEST(Gpt2Tokenizer, ConcurrentEncodesAgree) {
  REQUIRE_GPT2();
  std::string text;
  for (int i = 0; i < 2000; ++i)
    text += "word" + std::to_string(i % 97) + " Zyzzyva" + std::to_string(i) + "\n";
  const std::vector<TokenId> expected = gpt2->encode(text);
  std::vector<std::vector<TokenId>> results(4);
  std::vector<std::thread> threads;
  for (auto& r : results) threads.emplace_back([&] { r = gpt2->encode(text); });
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_EQ(r, expected);
}

TEST(Gpt2Tokenizer, LoadsTheOpenAiFilePairToo) {
  REQUIRE_GPT2();
  const testing::fs::path source = *testing::find_gpt2_dir();
  const bool hf = testing::fs::exists(source / "vocab.json");
  testing::TempDir dir;
  testing::fs::copy_file(source / (hf ? "vocab.json" : "encoder.json"),
                         dir.path() / "encoder.json");
  testing::fs::copy_file(source / (hf ? "merges.txt" : "vocab.bpe"), dir.path() / "vocab.bpe");
  auto openai = Gpt2Tokenizer::load(dir.path());
  ASSERT_TRUE(openai.is_ok()) << openai.status().to_string();
  EXPECT_NE(openai.value()->name().find("encoder.json + "), std::string::npos);
  const std::string text = "The OpenAI layout: encoder.json and vocab.bpe, 50257 tokens.";
  EXPECT_EQ(openai.value()->encode(text), gpt2->encode(text));
}

// Every code point against tiktoken, in a probe string that puts it next to letters, digits,
// an apostrophe and spaces. Needs the output of `tiktoken_golden.mjs --exhaustive FILE`.
TEST(Gpt2Tokenizer, MatchesTiktokenOnEveryCodePoint) {
  const char* file = std::getenv("TRIDENT_TIKTOKEN_EXHAUSTIVE");
  if (file == nullptr || !*file)
    GTEST_SKIP() << "set TRIDENT_TIKTOKEN_EXHAUSTIVE to the output of "
                    "`node tests/data/tiktoken_golden.mjs --exhaustive FILE`";
  REQUIRE_GPT2();
  const auto [mismatches, complete] = testing::count_code_point_mismatches(
      *gpt2, golden()["exhaustive_probe"], testing::read_file(file),
      [](uint32_t cp) { ADD_FAILURE() << "mismatch for " << format_code_point(cp); });
  EXPECT_TRUE(complete) << file << " does not hold one record per code point";
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace
}  // namespace trident::data
