// GPT-2's pre-tokenization pattern on PCRE2. See Note [Unicode classes of the GPT-2 pattern]
// in pretokenize.h for why the classes are spelled out.
#include "data/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string>

#include "core/check.h"
#include "data/utf8.h"

namespace trident::data {
namespace {

// Unicode's White_Space property (PropList.txt), which is Rust's \s: 25 code points.
constexpr const char* kWhiteSpace =
    R"(\t\n\x{0B}\f\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F})"
    R"(\x{205F}\x{3000})";

// \p{L} and \p{N}, plus the letters and numbers assigned in Unicode 15.0-16.0 (tiktoken's
// tables) that PCRE2 10.42's Unicode 14 tables lack. The ranges are the difference between the
// two sets, computed over every code point.
constexpr const char* kLetters =
    R"(\p{L}\x{1C89}-\x{1C8A}\x{A7CB}-\x{A7CD}\x{A7DA}-\x{A7DC}\x{105C0}-\x{105F3})"
    R"(\x{10D4A}-\x{10D65}\x{10D6F}-\x{10D85}\x{10EC2}-\x{10EC4}\x{1123F}-\x{11240})"
    R"(\x{11380}-\x{11389}\x{1138B}\x{1138E}\x{11390}-\x{113B5}\x{113B7}\x{113D1}\x{113D3})"
    R"(\x{11BC0}-\x{11BE0}\x{11F02}\x{11F04}-\x{11F10}\x{11F12}-\x{11F33}\x{1342F})"
    R"(\x{13441}-\x{13446}\x{13460}-\x{143FA}\x{16100}-\x{1611D}\x{16D40}-\x{16D6C}\x{18CFF})"
    R"(\x{1B132}\x{1B155}\x{1DF25}-\x{1DF2A}\x{1E030}-\x{1E06D}\x{1E4D0}-\x{1E4EB})"
    R"(\x{1E5D0}-\x{1E5ED}\x{1E5F0}\x{2B739}\x{2EBF0}-\x{2EE5D}\x{31350}-\x{323AF})";
constexpr const char* kNumbers =
    R"(\p{N}\x{10D40}-\x{10D49}\x{116D0}-\x{116E3}\x{11BF0}-\x{11BF9}\x{11F50}-\x{11F59})"
    R"(\x{16130}-\x{16139}\x{16D70}-\x{16D79}\x{1CCF0}-\x{1CCF9}\x{1D2C0}-\x{1D2D3})"
    R"(\x{1E4F0}-\x{1E4F9}\x{1E5F1}-\x{1E5FA})";

// tiktoken's gpt2 pattern with the classes above: \s -> [WS], \S -> [^WS].
std::string pieces_pattern() {
  const std::string ws = kWhiteSpace, letter = kLetters, number = kNumbers;
  return "'s|'t|'re|'ve|'m|'ll|'d| ?[" + letter + "]+| ?[" + number + "]+| ?[^" + ws + letter +
         number + "]+|[" + ws + "]+(?![^" + ws + "])|[" + ws + "]+";
}

// One code point, in the group of its class (for classify()).
std::string classes_pattern() {
  return std::string("([") + kLetters + "])|([" + kNumbers + "])|([" + kWhiteSpace + "])";
}

struct CodeDeleter {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};
struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};
using Code = std::unique_ptr<pcre2_code, CodeDeleter>;
using MatchData = std::unique_ptr<pcre2_match_data, MatchDataDeleter>;

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

// Compiled anchored (a match must start where the search starts) and JIT-compiled when PCRE2
// has a JIT for this machine; UCP so that no construct falls back to ASCII-only meanings.
Code compile(const std::string& pattern, bool& jit) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  Code code(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                          PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &error, &offset, nullptr));
  TRI_ASSERT(code != nullptr, "PCRE2 rejected the GPT-2 pattern at offset ", offset, ": ",
             pcre2_message(error));
  jit = pcre2_jit_compile(code.get(), PCRE2_JIT_COMPLETE) == 0;
  return code;
}

}  // namespace

struct Gpt2Pretokenizer::Impl {
  bool pieces_jit = false, classes_jit = false;
  Code pieces = compile(pieces_pattern(), pieces_jit);
  Code classes = compile(classes_pattern(), classes_jit);

  int match(const pcre2_code* code, bool jit, std::string_view text, size_t start,
            pcre2_match_data* md) const {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    return jit ? pcre2_jit_match(code, subject, text.size(), start, 0, md, nullptr)
               : pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, md, nullptr);
  }
};

Gpt2Pretokenizer::Gpt2Pretokenizer() : impl_(std::make_unique<Impl>()) {}
Gpt2Pretokenizer::~Gpt2Pretokenizer() = default;

void Gpt2Pretokenizer::split(std::string_view text,
                             const std::function<void(std::string_view)>& on_piece) const {
  if (text.empty()) return;
  MatchData md(pcre2_match_data_create_from_pattern(impl_->pieces.get(), nullptr));
  TRI_CHECK_KIND(ErrorKind::kInternal, md != nullptr, "out of memory for PCRE2 match data");
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(md.get());
  size_t pos = 0;
  while (pos < text.size()) {
    // Every code point is a letter, a number, White_Space or other, so some alternative
    // matches at every position: a failed match is a bug (or PCRE2 running out of resources).
    const int rc = impl_->match(impl_->pieces.get(), impl_->pieces_jit, text, pos, md.get());
    TRI_ASSERT(rc > 0 && ovector[0] == pos && ovector[1] > pos,
               "the GPT-2 pattern did not match at byte ", pos, " of ", text.size(),
               (rc < 0 ? " (PCRE2: " + pcre2_message(rc) + ")" : std::string()));
    on_piece(text.substr(pos, ovector[1] - pos));
    pos = ovector[1];
  }
}

std::vector<std::string_view> Gpt2Pretokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  split(text, [&](std::string_view piece) { pieces.push_back(piece); });
  return pieces;
}

CharClass Gpt2Pretokenizer::classify(uint32_t cp) const {
  std::string text;
  append_utf8(text, cp);
  MatchData md(pcre2_match_data_create_from_pattern(impl_->classes.get(), nullptr));
  const int rc = impl_->match(impl_->classes.get(), impl_->classes_jit, text, 0, md.get());
  // rc is 1 + the number of the highest group that matched: 2 letter, 3 number, 4 space.
  switch (rc) {
    case 2:
      return CharClass::kLetter;
    case 3:
      return CharClass::kNumber;
    case 4:
      return CharClass::kWhiteSpace;
    default:
      TRI_ASSERT(rc == PCRE2_ERROR_NOMATCH, "PCRE2 failed to classify ", format_code_point(cp),
                 ": ", pcre2_message(rc));
      return CharClass::kOther;
  }
}

}  // namespace trident::data
