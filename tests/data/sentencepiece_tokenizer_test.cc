// SentencePiece models through the library: a BPE model with byte fallback trained here by the
// library's trainer on a small text; our tokenizer gives the library's ids, round-trips, and
// names bos/eos and the vocabulary size; bad model files are errors naming the file.
#include "data/byte_tokenizer.h"
#include "data/decode_continuation.h"
#include "data/sentencepiece_tokenizer.h"

#include <gtest/gtest.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include "core/check.h"
#include "data/test_data.h"

namespace trident::data {
namespace {

using testing::escaped;

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

// A few thousand words of ASCII text (deterministic), so that the trainer learns merges.
std::string training_text() {
  const char* words[] = {"the",   "quick",    "brown", "fox",     "jumps", "over",   "lazy",
                         "dog",   "and",      "then",  "runs",    "into",  "forest", "where",
                         "trees", "are",      "tall",  "green",   "hello", "world",  "tokenizer",
                         "model", "training", "piece", "sentence"};
  std::string text;
  uint32_t state = 12345;
  for (int line = 0; line < 400; ++line) {
    for (int w = 0; w < 12; ++w) {
      state = state * 1664525u + 1013904223u;
      text += words[(state >> 8) % (sizeof(words) / sizeof(words[0]))];
      text += w + 1 < 12 ? " " : ".\n";
    }
  }
  return text;
}

// The model, trained once per process (Llama's settings: BPE, byte fallback, no normalization,
// extra whitespace kept, digits split).
const std::string& model_path() {
  static testing::TempDir dir;
  static const std::string path = [] {
    testing::write_file(dir.path() / "train.txt", training_text());
    const std::string prefix = (dir.path() / "m").string();
    const auto status = sentencepiece::SentencePieceTrainer::Train(
        "--input=" + (dir.path() / "train.txt").string() + " --model_prefix=" + prefix +
        " --model_type=bpe --vocab_size=400 --byte_fallback=true --character_coverage=1.0"
        " --normalization_rule_name=identity --remove_extra_whitespaces=false --split_digits=true"
        " --bos_id=1 --eos_id=2 --unk_id=0 --minloglevel=2");
    if (!status.ok())
      throw std::runtime_error("SentencePiece training failed: " + status.ToString());
    return prefix + ".model";
  }();
  return path;
}

const char* const kTexts[] = {
    "hello world",
    "the quick brown fox jumps over the lazy dog.",
    "  two leading spaces and trailing  ",
    "unseen letters: caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80 (byte fallback)",
    "digits 12345 and tabs\tand\nnewlines\n",
    "",
};

TEST(SentencePieceTokenizer, GivesTheLibrarysIdsAndRoundTrips) {
  auto loaded = SentencePieceTokenizer::load(model_path());
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  const SentencePieceTokenizer& tok = *loaded.value();
  sentencepiece::SentencePieceProcessor library;
  ASSERT_TRUE(library.Load(model_path()).ok());
  bool used_byte_fallback = false;
  for (const char* text : kTexts) {
    std::vector<int> expected;
    ASSERT_TRUE(library.Encode(text, &expected).ok());
    const std::vector<TokenId> ids = tok.encode(text);
    EXPECT_EQ(ids, std::vector<TokenId>(expected.begin(), expected.end())) << escaped(text);
    EXPECT_EQ(tok.decode(ids), text) << escaped(text);
    for (TokenId id : ids) used_byte_fallback |= library.IsByte(static_cast<int>(id));
  }
  EXPECT_TRUE(used_byte_fallback) << "the unseen characters should be byte pieces";
  EXPECT_EQ(tok.vocab_size(), 400);
  EXPECT_EQ(tok.bos_id(), std::optional<TokenId>(1));
  EXPECT_EQ(tok.eot_id(), std::optional<TokenId>(2));
  EXPECT_EQ(tok.name(), "sentencepiece (" + model_path() + ")");
}

TEST(SentencePieceTokenizer, ControlPiecesAreSpecialOnlyWhenAllowed) {
  auto loaded = SentencePieceTokenizer::load(model_path());
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  const SentencePieceTokenizer& tok = *loaded.value();
  const std::vector<TokenId> hello = tok.encode("hello");
  std::vector<TokenId> expected = {1};
  expected.insert(expected.end(), hello.begin(), hello.end());
  expected.push_back(2);
  EXPECT_EQ(tok.encode("<s>hello</s>", true), expected);
  const std::vector<TokenId> plain = tok.encode("<s>hello</s>", false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 1u) + std::count(plain.begin(), plain.end(), 2u),
            0);
  EXPECT_EQ(tok.decode(plain), "<s>hello</s>");
}

TEST(SentencePieceTokenizer, BadInputIsAnErrorNamingIt) {
  auto loaded = SentencePieceTokenizer::load(model_path());
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EXPECT_THROW((void)loaded.value()->encode("bad \xC3("), Error);
  try {
    (void)loaded.value()->decode(std::vector<TokenId>{5, 400});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIndex);
    EXPECT_CONTAINS(e.message(),
                    "cannot decode id 400 at position 1: the vocabulary has 400 pieces");
  }
  testing::TempDir dir;
  testing::write_file(dir.path() / "tokenizer.model", "this is not a protobuf");
  auto bad = SentencePieceTokenizer::load(dir.path() / "tokenizer.model");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_CONTAINS(bad.status().message(), (dir.path() / "tokenizer.model").string() +
                                              ": not a SentencePiece model the library can load");
  auto missing = SentencePieceTokenizer::load(dir.path() / "absent.model");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().kind(), ErrorKind::kIO);
}

// A continuation keeps the space its first piece stands for (Note [Decoding a continuation]):
// decode() of the new tokens alone drops it, as SentencePiece decodes the start of a text.
TEST(SentencePieceTokenizer, AContinuationKeepsItsLeadingSpace) {
  auto loaded = SentencePieceTokenizer::load(model_path());
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  const SentencePieceTokenizer& tok = *loaded.value();
  const std::vector<TokenId> all = tok.encode("the quick brown fox jumps");
  for (size_t cut = 1; cut < all.size(); ++cut) {
    const std::span<const TokenId> context(all.data(), cut), rest(all.data() + cut, all.size() - cut);
    EXPECT_EQ(tok.decode(context) + decode_continuation(tok, context, rest), "the quick brown fox jumps") << cut;
  }
  // "jumps" encodes as "\u2581jumps" (the model's dummy prefix): a word that follows a space.
  const std::vector<TokenId> fox = tok.encode("the quick brown fox"), jumps = tok.encode("jumps");
  EXPECT_EQ(tok.decode(jumps), "jumps");  // the leading space dropped: why the context is needed
  EXPECT_EQ(decode_continuation(tok, fox, jumps), " jumps");
  EXPECT_EQ(decode_continuation(tok, {}, jumps), "jumps");  // no context: as decode()
  const ByteTokenizer bytes;
  const std::vector<TokenId> a = bytes.encode("ab"), b = bytes.encode(" c\xc3");
  EXPECT_EQ(decode_continuation(bytes, a, b), " c\xc3");  // byte-level: exactly decode(ids)
}

}  // namespace
}  // namespace trident::data
