// Loading GPT-2 vocabulary files: both layouts, and every kind of malformed input is refused
// with a message naming the file, the line (and column) and the value.
#include "data/gpt2_vocab.h"

#include <gtest/gtest.h>

#include "data/test_data.h"

namespace trident::data {
namespace {

using testing::parse_tiny;
using testing::TempDir;
using testing::tiny_vocab;
using testing::write_file;

const std::vector<std::pair<std::string, std::string>> kMerges = {
    {"h", "e"}, {"l", "l"}, {"he", "ll"}, {" ", "w"}, {"hell", "o"}};

// The error message of parsing (vocab_json, merges_txt), which must fail.
std::string parse_error(const std::string& vocab_json, const std::string& merges_txt) {
  auto parsed = parse_gpt2_vocab(vocab_json, "dir/vocab.json", merges_txt, "dir/merges.txt");
  EXPECT_FALSE(parsed.is_ok());
  if (parsed.is_ok()) return "";
  EXPECT_EQ(parsed.status().kind(), ErrorKind::kValue);
  return parsed.status().message();
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

TEST(Gpt2Vocab, ParsesATinyVocabularyWithItsOwnIds) {
  const BpeVocab v = parse_tiny(tiny_vocab(kMerges));
  ASSERT_EQ(v.token_bytes.size(), 256u + kMerges.size() + 1);
  EXPECT_EQ(v.token_bytes['A'], "A");  // ids in byte order, not GPT-2's
  EXPECT_EQ(v.token_bytes[' '], " ");
  EXPECT_EQ(v.token_bytes[256 + 2], "hell");
  EXPECT_EQ(v.token_bytes[256 + 3], " w");
  EXPECT_EQ(v.merge_results, (std::vector<TokenId>{256, 257, 258, 259, 260}));
  ASSERT_EQ(v.special_tokens.size(), 1u);
  EXPECT_EQ(v.special_tokens[0].first, "<|endoftext|>");
  EXPECT_EQ(v.special_tokens[0].second, 261u);
  EXPECT_EQ(v.source, "vocab.json + merges.txt");
}

TEST(Gpt2Vocab, AcceptsJsonEscapesAndWhitespace) {
  testing::TinyVocab t = tiny_vocab(kMerges);
  // Spell 'A' (id 65) as \u0041 and add newlines between entries.
  const std::string a = "\"A\": 65,";
  t.vocab_json.replace(t.vocab_json.find(a), a.size(), "\n  \"\\u0041\" :\t65 ,\n");
  EXPECT_EQ(parse_tiny(t).token_bytes[65], "A");
}

TEST(Gpt2Vocab, LoadsEitherFileLayoutFromADirectory) {
  const testing::TinyVocab t = tiny_vocab(kMerges);
  TempDir hf, openai, both;
  write_file(hf.path() / "vocab.json", t.vocab_json);
  write_file(hf.path() / "merges.txt", t.merges_txt);
  write_file(openai.path() / "encoder.json", t.vocab_json);
  write_file(openai.path() / "vocab.bpe", t.merges_txt);
  auto a = load_gpt2_vocab(hf.path());
  auto b = load_gpt2_vocab(openai.path());
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  EXPECT_EQ(a.value().token_bytes, b.value().token_bytes);
  EXPECT_EQ(b.value().source, (openai.path() / "encoder.json").string() + " + " +
                                  (openai.path() / "vocab.bpe").string());
  // With both pairs present, Hugging Face's is used.
  write_file(both.path() / "vocab.json", t.vocab_json);
  write_file(both.path() / "merges.txt", t.merges_txt);
  write_file(both.path() / "encoder.json", "not read");
  write_file(both.path() / "vocab.bpe", "not read");
  EXPECT_TRUE(load_gpt2_vocab(both.path()).is_ok());
}

TEST(Gpt2Vocab, MissingFilesAreIoErrorsSayingWhatToDo) {
  TempDir empty, half;
  auto none = load_gpt2_vocab(empty.path());
  ASSERT_FALSE(none.is_ok());
  EXPECT_EQ(none.status().kind(), ErrorKind::kIO);
  EXPECT_CONTAINS(none.status().message(), "vocab.json and merges.txt");
  EXPECT_CONTAINS(none.status().message(), "scripts/fetch-gpt2-vocab.sh");
  write_file(half.path() / "encoder.json", "{}");
  auto partial = load_gpt2_vocab(half.path());
  ASSERT_FALSE(partial.is_ok());
  EXPECT_CONTAINS(partial.status().message(), (half.path() / "vocab.bpe").string() + " does not");
}

TEST(Gpt2Vocab, MalformedJsonNamesLineAndColumn) {
  const std::string merges = tiny_vocab(kMerges).merges_txt;
  EXPECT_CONTAINS(parse_error("[1, 2]", merges), "dir/vocab.json:1:1: expected '{'");
  EXPECT_CONTAINS(parse_error("{\"a\": 1,\n \"b\" 2}", merges),
                  "dir/vocab.json:2:6: expected ':' after the key \"b\"");
  EXPECT_CONTAINS(parse_error("{\"a\": 1 \"b\": 2}", merges),
                  "dir/vocab.json:1:9: expected ',' or '}' after the entry for \"a\"");
  EXPECT_CONTAINS(parse_error("{\"a\": 1", merges), "expected ',' or '}'");
  EXPECT_CONTAINS(parse_error("{\"a\": 1} x", merges), "unexpected text after the end");
  EXPECT_CONTAINS(
      parse_error("{\"a\": \"one\"}", merges),
      "dir/vocab.json:1:7: the value of \"a\" must be a non-negative integer id, found '\"one\"'");
  EXPECT_CONTAINS(parse_error("{\"a\": -1}", merges), "found '-1'");
  EXPECT_CONTAINS(parse_error("{\"a\": 1.5}", merges), "found '1.5'");
  EXPECT_CONTAINS(parse_error("{\"a\": 99999999999}", merges), "larger than 2^31 - 1");
  EXPECT_CONTAINS(parse_error("{\"a\\q\": 1}", merges), "invalid escape '\\q'");
  EXPECT_CONTAINS(parse_error("{\"\\ud800x\": 1}", merges), "not followed by a \\u low surrogate");
  EXPECT_CONTAINS(parse_error("{\"\\udc00\": 1}", merges), "lone low surrogate U+DC00");
  EXPECT_CONTAINS(parse_error("{\"a\xC3(\": 1}", merges), "dir/vocab.json:1:4: not valid UTF-8");
  EXPECT_CONTAINS(parse_error("{\"abc", merges), "the file ends inside a string");
}

TEST(Gpt2Vocab, BadIdsAreNamed) {
  const testing::TinyVocab t = tiny_vocab(kMerges);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string json = t.vocab_json;
    json.replace(json.find(from), from.size(), to);
    return parse_error(json, t.merges_txt);
  };
  EXPECT_CONTAINS(with("\"B\": 66", "\"B\": 65"), "the id 65 of \"B\" is already the id of \"A\"");
  EXPECT_CONTAINS(
      with("\"B\": 66", "\"B\": 9999"),
      "the id 9999 of \"B\" is out of range: a vocabulary of 262 tokens must use the ids 0..261");
  EXPECT_CONTAINS(with("\"B\": 66", "\"A\": 66"), "the token \"A\" appears twice");
}

TEST(Gpt2Vocab, VocabulariesThatAreNotByteLevelBpeAreRefused) {
  const testing::TinyVocab t = tiny_vocab(kMerges);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string json = t.vocab_json;
    json.replace(json.find(from), from.size(), to);
    return parse_error(json, t.merges_txt);
  };
  // A token for 'B' missing (renamed to a word): the byte has no token.
  EXPECT_CONTAINS(with("\"B\": 66", "\"[PAD]\": 66"),
                  "dir/vocab.json: there is no token for byte 0x42 (written B, U+0042)");
  // An extra token that no merge makes.
  EXPECT_CONTAINS(with("\"<|endoftext|>\": 261", "\"##ing\": 261"),
                  "the token \"##ing\" (id 261) is neither a byte, the result of a merge in "
                  "dir/merges.txt, nor a special token");
  // A merge result spelled with a code point outside the 256 byte symbols.
  std::string json = t.vocab_json, merges = t.merges_txt;
  json.replace(json.find("\"hell\""), 6, "\"h\xE4\xB8\xADll\"");
  merges.replace(merges.find("he ll"), 5, "h\xE4\xB8\xAD ll");
  EXPECT_CONTAINS(parse_error(json, merges),
                  "names \"h\xE4\xB8\xAD\", which is not in dir/vocab.json");
}

TEST(Gpt2Vocab, BadMergesNameTheLine) {
  const testing::TinyVocab t = tiny_vocab(kMerges);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string merges = t.merges_txt;
    merges.replace(merges.find(from), from.size(), to);
    return parse_error(t.vocab_json, merges);
  };
  EXPECT_CONTAINS(with("l l\n", "l l x\n"),
                  "dir/merges.txt:3: expected a merge \"LEFT RIGHT\" (two tokens separated by one "
                  "space), found \"l l x\"");
  EXPECT_CONTAINS(with("l l\n", "\n"), "dir/merges.txt:3: expected a merge");
  EXPECT_CONTAINS(with("l l\n", "l  l\n"), "dir/merges.txt:3: expected a merge");
  EXPECT_CONTAINS(
      with("he ll\n", "he lq\n"),
      "dir/merges.txt:4: the merge \"he\" + \"lq\" names \"lq\", which is not in dir/vocab.json");
  EXPECT_CONTAINS(
      with("he ll\n", "he he\n"),
      "dir/merges.txt:4: the merge \"he\" + \"he\" makes \"hehe\", which is not in dir/vocab.json");
  EXPECT_CONTAINS(with("hell o\n", "hell o\nhe llo\n"), "names \"llo\"");
  EXPECT_CONTAINS(
      with("hell o\n", "hell o\nh e\n"),
      "dir/merges.txt:7: the merge \"h\" + \"e\" makes \"he\", which line 2 already makes");
  EXPECT_CONTAINS(parse_error(t.vocab_json, "#version: 0.2\n"),
                  "dir/merges.txt: the file has no merges");
  // The #version line is optional, and Windows line ends are accepted.
  std::string crlf = t.merges_txt.substr(t.merges_txt.find('\n') + 1);
  for (size_t at = crlf.find('\n'); at != std::string::npos; at = crlf.find('\n', at + 2))
    crlf.replace(at, 1, "\r\n");
  EXPECT_TRUE(parse_gpt2_vocab(t.vocab_json, "v", crlf, "m").is_ok());
}

}  // namespace
}  // namespace trident::data
