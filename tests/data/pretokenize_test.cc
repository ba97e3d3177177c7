// The split patterns (GPT-2's, cl100k's, o200k's): the pieces they make, and the Unicode classes
// they use (Note [Unicode classes of the split patterns]). Whole-encoding checks against
// tiktoken are in gpt2_tokenizer_test.cc and tiktoken_ranks_test.cc.
#include "data/pretokenize.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace trident::data {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(std::string_view text) {
  static const Pretokenizer pretokenizer;
  Pieces out;
  for (std::string_view p : pretokenizer.split(text)) out.emplace_back(p);
  return out;
}

TEST(Pretokenizer, SplitsLikeTiktoken) {
  EXPECT_EQ(split(""), Pieces{});
  EXPECT_EQ(split("Hello world!"), (Pieces{"Hello", " world", "!"}));
  EXPECT_EQ(split("I'm they're DON'T"), (Pieces{"I", "'m", " they", "'re", " DON", "'", "T"}));
  EXPECT_EQ(split(" 123abc 4.5"), (Pieces{" 123", "abc", " 4", ".", "5"}));
  // A run of spaces gives all but the last to its own piece; the last joins the next word.
  EXPECT_EQ(split("a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(split("x  \n\n y"), (Pieces{"x", "  \n\n", " y"}));
  EXPECT_EQ(split("end  "), (Pieces{"end", "  "}));
  EXPECT_EQ(split("\t\tfoo"), (Pieces{"\t", "\t", "foo"}));
  EXPECT_EQ(split(" !!?? ok"), (Pieces{" !!??", " ok"}));
  EXPECT_EQ(split("caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87"),
            (Pieces{"caf\xC3\xA9", " \xE4\xB8\xAD\xE6\x96\x87"}));
  // A combining mark is not a letter: it ends the letter run.
  EXPECT_EQ(split("e\xCC\x81x"), (Pieces{"e", "\xCC\x81", "x"}));
}

Pieces split_with(SplitPattern pattern, std::string_view text) {
  const Pretokenizer pretokenizer(pattern);
  Pieces out;
  for (std::string_view p : pretokenizer.split(text)) out.emplace_back(p);
  return out;
}

TEST(Pretokenizer, Cl100kSplitsLikeTiktoken) {
  auto split = [](std::string_view text) { return split_with(SplitPattern::kCl100k, text); };
  // Case-insensitive contractions (also with U+017F LATIN SMALL LETTER LONG S), digit groups
  // of at most 3 digits with no leading space, a non-letter joining the letters after it.
  EXPECT_EQ(split("I'LL x'\xC5\xBF"), (Pieces{"I", "'LL", " x", "'\xC5\xBF"}));
  EXPECT_EQ(split("n 1234567"), (Pieces{"n", " ", "123", "456", "7"}));
  EXPECT_EQ(split("(hello) $x"), (Pieces{"(hello", ")", " $", "x"}));
  // Punctuation keeps the newlines after it; newlines keep the spaces before them.
  EXPECT_EQ(split("end.\n\nnext  \n x"), (Pieces{"end", ".\n\n", "next", "  \n", " x"}));
}

TEST(Pretokenizer, O200kSplitsLikeTiktoken) {
  auto split = [](std::string_view text) { return split_with(SplitPattern::kO200k, text); };
  // A word is a run of upper-case letters then one of lower-case letters ("HTTPServer" is one
  // piece, "CamelCase" two); contractions stay with their word.
  EXPECT_EQ(split("HTTPServer CamelCase"), (Pieces{"HTTPServer", " Camel", "Case"}));
  EXPECT_EQ(split("they're DON'T"), (Pieces{"they're", " DON'T"}));
  // A combining mark is in both run classes (it continues the word), and / joins punctuation.
  EXPECT_EQ(split("e\xCC\x81x a//b"), (Pieces{"e\xCC\x81x", " a", "//", "b"}));
  // A mark assigned in Unicode 16 (U+0897 ARABIC PEPET) continues a word, as in tiktoken.
  EXPECT_EQ(split("a\xE0\xA2\x97" "b"), (Pieces{"a\xE0\xA2\x97" "b"}));
}

TEST(Pretokenizer, KnowsTiktokensSpellingsOfThePatterns) {
  EXPECT_EQ(split_pattern_from_regex(
                R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"),
            SplitPattern::kGpt2);
  EXPECT_EQ(split_pattern_from_regex(R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|)"
                                     R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"),
            SplitPattern::kCl100k);
  EXPECT_EQ(split_pattern_from_regex(R"(\p{L}+)"), std::nullopt);
}

TEST(Pretokenizer, PiecesConcatenateToTheText) {
  const std::string text =
      "Mixed: tabs\t\tand  spaces \n\n\n numbers 3.14, 'quotes' \xE2\x80\x94 done.  ";
  std::string joined;
  for (const std::string& p : split(text)) joined += p;
  EXPECT_EQ(joined, text);
}

TEST(Pretokenizer, WhiteSpaceIsExactlyUnicodeWhiteSpace) {
  // PropList.txt's White_Space (Rust's \s). PCRE2's own \s would add U+180E.
  const std::vector<uint32_t> white_space = {0x09,   0x0A,   0x0B,   0x0C,   0x0D,   0x20,   0x85,
                                             0xA0,   0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004,
                                             0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028,
                                             0x2029, 0x202F, 0x205F, 0x3000};
  const Pretokenizer pretokenizer;
  std::vector<uint32_t> found;
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp)
    if ((cp < 0xD800 || cp > 0xDFFF) && pretokenizer.classify(cp) == CharClass::kWhiteSpace)
      found.push_back(cp);
  EXPECT_EQ(found, white_space);
  EXPECT_EQ(pretokenizer.classify(0x180E), CharClass::kOther);
  EXPECT_EQ(pretokenizer.classify(0x200B), CharClass::kOther);  // zero-width space is Cf
  EXPECT_EQ(pretokenizer.classify(0xFEFF), CharClass::kOther);
}

TEST(Pretokenizer, LettersAndNumbersFollowTiktokensUnicode16Tables) {
  const Pretokenizer p;
  EXPECT_EQ(p.classify('a'), CharClass::kLetter);
  EXPECT_EQ(p.classify(0xE9), CharClass::kLetter);    // é
  EXPECT_EQ(p.classify(0x4E2D), CharClass::kLetter);  // 中
  EXPECT_EQ(p.classify(0x01C5), CharClass::kLetter);  // ǅ (Lt)
  EXPECT_EQ(p.classify(0x0301), CharClass::kOther);   // combining acute (Mn)
  EXPECT_EQ(p.classify('7'), CharClass::kNumber);
  EXPECT_EQ(p.classify(0xBD), CharClass::kNumber);    // ½ (No)
  EXPECT_EQ(p.classify(0x216B), CharClass::kNumber);  // Ⅻ (Nl)
  EXPECT_EQ(p.classify(0x0663), CharClass::kNumber);  // Arabic-Indic 3
  EXPECT_EQ(p.classify(0x1F600), CharClass::kOther);  // emoji
  EXPECT_EQ(p.classify('\''), CharClass::kOther);
  // New in Unicode 15.0-16.0, absent from PCRE2 10.42's Unicode 14 tables.
  EXPECT_EQ(p.classify(0x11F04), CharClass::kLetter);  // Kawi
  EXPECT_EQ(p.classify(0x31350), CharClass::kLetter);  // CJK extension H
  EXPECT_EQ(p.classify(0x2EBF0), CharClass::kLetter);  // CJK extension I (15.1)
  EXPECT_EQ(p.classify(0x105C0), CharClass::kLetter);  // Todhri (16.0)
  EXPECT_EQ(p.classify(0x1C89), CharClass::kLetter);   // Cyrillic Tje (16.0)
  EXPECT_EQ(p.classify(0x10D40), CharClass::kNumber);  // Garay digit zero (16.0)
  EXPECT_EQ(p.classify(0x1CCF0), CharClass::kNumber);  // outlined digit zero (16.0)
  // New in Unicode 17: unknown to tiktoken 1.0.22, so "other".
  EXPECT_EQ(p.classify(0x33000), CharClass::kOther);
}

TEST(Pretokenizer, VeryLongRunsDoNotExhaustPcre2) {
  const size_t n = 8u << 20;
  for (const char c : {' ', 'a', '7', '!'}) {
    // Built by appending: GCC 12 warns falsely (-Warray-bounds) on `std::string&& + "x"` where
    // it inlines more, as beside the other files of a unity batch (Note [Unity test programs]).
    std::string text(n, c);
    text += 'x';
    size_t pieces = 0, bytes = 0;
    Pretokenizer().split(text, [&](std::string_view piece) {
      ++pieces;
      bytes += piece.size();
    });
    EXPECT_EQ(bytes, text.size());
    EXPECT_LE(pieces, 3u) << "run of '" << c << "'";
  }
}

}  // namespace
}  // namespace trident::data
