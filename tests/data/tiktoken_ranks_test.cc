// tiktoken rank files and their encodings against OpenAI's tiktoken: the reference strings and
// corpora of tiktoken_reference/expected.json (made by tiktoken_reference/generate.mjs) for
// cl100k_base and o200k_base, special tokens, Llama 3's layout, and the rank file's errors.
// The rank files are fetched, not stored (scripts/fetch-tiktoken-ranks.sh); tests that need
// them skip with a message.
#include "data/tiktoken_ranks.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "data/test_data.h"
#include "data/utf8.h"

namespace trident::data {
namespace {

using testing::escaped;
using testing::ids_hash;

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

const nlohmann::json& reference() {
  static const nlohmann::json r = nlohmann::json::parse(testing::read_file(
      testing::fs::path(__FILE__).parent_path() / "tiktoken_reference" / "expected.json"));
  return r;
}

// The encoding's tokenizer, loaded once per process; null when its rank file is missing.
const ByteLevelBpeTokenizer* shared_encoding(const std::string& name) {
  static std::map<std::string, std::unique_ptr<ByteLevelBpeTokenizer>> loaded;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (!loaded.contains(name)) {
    std::optional<testing::fs::path> file = testing::find_rank_file(name);
    std::unique_ptr<ByteLevelBpeTokenizer> tok;
    if (file) {
      auto result = load_tiktoken_ranks(*file);
      result.status().throw_if_error();
      tok = std::move(result).value();
    }
    loaded.emplace(name, std::move(tok));
  }
  return loaded[name].get();
}

#define REQUIRE_ENCODING(var, name)                         \
  const ByteLevelBpeTokenizer* var = shared_encoding(name); \
  if (var == nullptr) GTEST_SKIP() << testing::rank_file_missing_message(name)

TEST(TiktokenRanks, ReferenceFileHasTheRequiredCoverage) {
  for (const char* name : {"cl100k_base", "o200k_base"}) {
    const nlohmann::json& e = reference()["encodings"][name];
    EXPECT_GE(e["cases"].size(), 70u) << name;
    EXPECT_EQ(e["corpora"].size(), 2u) << name;
  }
}

void check_reference_strings(const ByteLevelBpeTokenizer& tok, const std::string& name) {
  int checked = 0;
  for (const auto& c : reference()["encodings"][name]["cases"]) {
    const std::string text = c["text"];
    const bool allow_special = c["allow_special"];
    const std::vector<TokenId> expected = c["ids"].get<std::vector<TokenId>>();
    const std::vector<TokenId> got = tok.encode(text, allow_special);
    EXPECT_EQ(got, expected) << name << ": text \"" << escaped(text)
                             << "\" allow_special=" << allow_special;
    EXPECT_EQ(tok.decode(got), text) << name << ": text \"" << escaped(text) << "\"";
    ++checked;
  }
  EXPECT_GE(checked, 70);
}

TEST(TiktokenRanks, Cl100kMatchesTiktokenOnTheReferenceStrings) {
  REQUIRE_ENCODING(tok, "cl100k_base");
  check_reference_strings(*tok, "cl100k_base");
}

TEST(TiktokenRanks, O200kMatchesTiktokenOnTheReferenceStrings) {
  REQUIRE_ENCODING(tok, "o200k_base");
  check_reference_strings(*tok, "o200k_base");
}

void check_corpus(const ByteLevelBpeTokenizer& tok, const std::string& encoding,
                  const std::string& file) {
  const std::optional<testing::fs::path> path = testing::find_shared_file(file);
  if (!path) GTEST_SKIP() << file << " not found in ../shared/data";
  nlohmann::json entry;
  for (const auto& c : reference()["encodings"][encoding]["corpora"])
    if (c["file"] == file) entry = c;
  ASSERT_FALSE(entry.is_null()) << file << " is not in the reference file";
  const std::string text = testing::read_file(*path);
  const std::vector<TokenId> ids = tok.encode(text);
  EXPECT_EQ(ids.size(), entry["tokens"].get<size_t>()) << encoding << " token count of " << file;
  EXPECT_EQ(ids_hash(ids), entry["ids_fnv1a64"]) << encoding << " ids of " << file;
  EXPECT_TRUE(tok.decode(ids) == text) << file << " does not round-trip";
}

TEST(TiktokenRanks, Cl100kMatchesTiktokenOnWarAndPeaceAndShakespeare) {
  REQUIRE_ENCODING(tok, "cl100k_base");
  check_corpus(*tok, "cl100k_base", "war_and_peace.txt");
  check_corpus(*tok, "cl100k_base", "shakespeare.txt");
}

TEST(TiktokenRanks, O200kMatchesTiktokenOnWarAndPeaceAndShakespeare) {
  REQUIRE_ENCODING(tok, "o200k_base");
  check_corpus(*tok, "o200k_base", "war_and_peace.txt");
  check_corpus(*tok, "o200k_base", "shakespeare.txt");
}

TEST(TiktokenRanks, SpecialTokensVocabularySizeAndUnusedIds) {
  REQUIRE_ENCODING(cl100k, "cl100k_base");
  EXPECT_EQ(cl100k->vocab_size(), 100277);  // tiktoken's n_vocab
  EXPECT_EQ(cl100k->eot_id(), std::optional<TokenId>(100257));
  EXPECT_EQ(cl100k->bos_id(), std::nullopt);
  EXPECT_EQ(cl100k->encode("<|fim_middle|><|endofprompt|>", true),
            (std::vector<TokenId>{100259, 100276}));
  EXPECT_EQ(cl100k->decode(std::vector<TokenId>{100258}), "<|fim_prefix|>");
  try {
    (void)cl100k->decode(std::vector<TokenId>{9906, 100261});
    FAIL() << "expected an error for an id no token has";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIndex);
    EXPECT_CONTAINS(e.message(), "cannot decode id 100261 at position 1: no token has that id");
  }
  REQUIRE_ENCODING(o200k, "o200k_base");
  EXPECT_EQ(o200k->vocab_size(), 200019);
  EXPECT_EQ(o200k->eot_id(), std::optional<TokenId>(199999));
  EXPECT_EQ(o200k->pattern(), SplitPattern::kO200k);
}

// Every code point in a probe string against tiktoken (Note [Unicode classes of the split
// patterns]); the records are too large to store, so the test runs when given them.
TEST(TiktokenRanks, MatchesTiktokenOnEveryCodePoint) {
  const char* dir = std::getenv("TRIDENT_TIKTOKEN_EXHAUSTIVE_DIR");
  if (dir == nullptr || !*dir)
    GTEST_SKIP() << "set TRIDENT_TIKTOKEN_EXHAUSTIVE_DIR to a directory written by "
                    "`node tests/data/tiktoken_reference/generate.mjs --exhaustive DIR`";
  for (const char* name : {"cl100k_base", "o200k_base"}) {
    REQUIRE_ENCODING(tok, name);
    const auto [mismatches, complete] = testing::count_code_point_mismatches(
        *tok, reference()["exhaustive_probe"],
        testing::read_file(testing::fs::path(dir) / (std::string(name) + ".bin")),
        [&](uint32_t cp) { ADD_FAILURE() << name << ": mismatch for " << format_code_point(cp); });
    EXPECT_TRUE(complete) << name << ".bin does not hold one record per code point";
    EXPECT_EQ(mismatches, 0u) << name;
  }
}

// Llama 3's tokenizer.model is a rank file of 128,000 tokens; a file of that size (here o200k's
// first 128,000 ranks, as the real one is not freely downloadable) is read as Llama 3's:
// cl100k's pattern and the 256 special tokens from 128000.
TEST(TiktokenRanks, A128kRankFileIsLlama3WithItsSpecialTokens) {
  const std::optional<testing::fs::path> o200k = testing::find_rank_file("o200k_base");
  if (!o200k) GTEST_SKIP() << testing::rank_file_missing_message("o200k_base");
  const std::string text = testing::read_file(*o200k);
  size_t end = 0;
  for (int line = 0; line < 128000; ++line) end = text.find('\n', end) + 1;
  testing::TempDir dir;
  testing::write_file(dir.path() / "tokenizer.model", text.substr(0, end));
  auto loaded = load_tiktoken_ranks(dir.path() / "tokenizer.model");
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  const ByteLevelBpeTokenizer& llama3 = *loaded.value();
  EXPECT_EQ(llama3.vocab_size(), 128256);
  EXPECT_EQ(llama3.pattern(), SplitPattern::kCl100k);
  EXPECT_EQ(llama3.bos_id(), std::optional<TokenId>(128000));
  EXPECT_EQ(llama3.eot_id(), std::optional<TokenId>(128001));
  EXPECT_EQ(
      llama3.encode("<|begin_of_text|>hi<|eot_id|><|reserved_special_token_247|>", true).front(),
      128000u);
  const std::vector<TokenId> ids =
      llama3.encode("<|start_header_id|><|eot_id|><|reserved_special_token_247|>", true);
  EXPECT_EQ(ids, (std::vector<TokenId>{128006, 128009, 128255}));
  EXPECT_EQ(llama3.name().rfind("llama3 (", 0), 0u) << llama3.name();
  // Told to be cl100k_base, the same file is refused by its size.
  auto wrong = load_tiktoken_ranks(dir.path() / "tokenizer.model", "cl100k_base");
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_CONTAINS(wrong.status().message(),
                  "cl100k_base has 100256 ranks, but the file has 128000");
}

// A small valid rank file: the 256 bytes (rank = byte) and then `extra` tokens.
std::string tiny_rank_file(const std::vector<std::string>& extra_base64) {
  static const char* kDigits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (int b = 0; b < 256; ++b)
    out += std::string{kDigits[b >> 2], kDigits[(b & 3) << 4], '=', '='} + " " + std::to_string(b) +
           "\n";
  int rank = 256;
  for (const std::string& t : extra_base64) out += t + " " + std::to_string(rank++) + "\n";
  return out;
}

std::string rank_error(const std::string& text) {
  auto parsed = parse_tiktoken_ranks(text, "r.tiktoken");
  return parsed.is_ok() ? std::string("(no error)") : parsed.status().message();
}

TEST(TiktokenRanks, ParsesATinyRankFile) {
  auto parsed = parse_tiktoken_ranks(tiny_rank_file({"aGU=", "aGVs"}), "r.tiktoken");  // he, hel
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
  const BpeVocab& v = parsed.value();
  ASSERT_EQ(v.token_bytes.size(), 258u);
  EXPECT_EQ(v.token_bytes[256], "he");
  EXPECT_EQ(v.token_bytes[257], "hel");
  EXPECT_EQ(v.merge_results, (std::vector<TokenId>{256, 257}));
  EXPECT_EQ(v.token_bytes[0x41], "A");
}

TEST(TiktokenRanks, BadRankFilesNameTheLine) {
  const std::string good = tiny_rank_file({"aGU="});
  EXPECT_CONTAINS(rank_error(good + "aGVs\n"),
                  "r.tiktoken:258: expected \"BASE64 RANK\" (a token's bytes in base64, one space, "
                  "its rank), found \"aGVs\"");
  EXPECT_CONTAINS(rank_error(good + "aGV 257\n"), "r.tiktoken:258: \"aGV\" is not standard base64");
  EXPECT_CONTAINS(rank_error(good + "aG!s 257\n"), "is not standard base64");
  EXPECT_CONTAINS(rank_error(good + "aGVs -1\n"),
                  "r.tiktoken:258: the rank \"-1\" is not a non-negative integer");
  EXPECT_CONTAINS(rank_error(good + "aGVs 256\n"),
                  "r.tiktoken:258: rank 256 is also the rank on line 257");
  EXPECT_CONTAINS(rank_error(good + "aGU= 257\n"),
                  "r.tiktoken:258: the token \"he\" is also listed on line 257");
  EXPECT_CONTAINS(rank_error(good + "aGVs 300\n"),
                  "r.tiktoken:258: the rank 300 of \"hel\" is out of range: ranks are ids and must be 0..N-1, "
                  "and a file of 258 lines has ranks below 258");
  // Under the 10^9 a rank may be written with, but not a table of 10^9 ids (std::bad_alloc).
  EXPECT_CONTAINS(rank_error(good + "aGVs 999999999\n"),
                  "r.tiktoken:258: the rank 999999999 of \"hel\" is out of range");
  EXPECT_CONTAINS(rank_error(""), "r.tiktoken: the rank file is empty");
  std::string no_a = good;
  no_a.replace(no_a.find("QQ== 65\n"), 8, "");
  no_a += "QQ== 65\n";  // moved, still fine
  EXPECT_EQ(rank_error(no_a), "(no error)");
  no_a.replace(no_a.find("QQ== 65\n"), 8, "aGVs 65\n");
  EXPECT_CONTAINS(rank_error(no_a), "r.tiktoken: there is no token for the byte 65");
}

TEST(TiktokenRanks, UnknownSizesAndNamesAreErrors) {
  testing::TempDir dir;
  testing::write_file(dir.path() / "mine.tiktoken", tiny_rank_file({"aGU="}));
  auto unknown = load_tiktoken_ranks(dir.path() / "mine.tiktoken");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_CONTAINS(unknown.status().message(),
                  "mine.tiktoken: a rank file of 257 tokens is none of the encodings trident knows "
                  "(cl100k_base (100256 ranks), o200k_base (199998 ranks), llama3 (128000 ranks))");
  auto bad_name = load_tiktoken_ranks(dir.path() / "mine.tiktoken", "p50k_base");
  ASSERT_FALSE(bad_name.is_ok());
  EXPECT_CONTAINS(bad_name.status().message(), "unknown tiktoken encoding 'p50k_base'");
  auto missing = load_tiktoken_ranks(dir.path() / "absent.tiktoken");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().kind(), ErrorKind::kIO);
}

}  // namespace
}  // namespace trident::data
