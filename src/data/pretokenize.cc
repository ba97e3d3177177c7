// tiktoken's split patterns on PCRE2. See Note [Unicode classes of the split patterns] in
// pretokenize.h for why the classes are spelled out.
#include "data/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string>

#include "core/check.h"
#include "data/unicode_classes.h"
#include "data/utf8.h"

namespace trident::data {
namespace {

namespace uc = unicode_classes;

// The contractions, case-sensitive (GPT-2) or not (cl100k, o200k).
constexpr const char* kContractions = "'s|'t|'re|'ve|'m|'ll|'d";

// tiktoken's patterns (pretokenize.h) with the classes of unicode_classes.h: \s -> [WS],
// \S -> [^WS], \p{L} -> [L], \p{N} -> [N].
std::string pieces_pattern(SplitPattern pattern) {
  const std::string ws = uc::white_space(), letter = uc::letters(), number = uc::numbers();
  // The tail every pattern shares: trailing White_Space that is not followed by more text
  // stays apart, so that " word" keeps its space.
  const std::string spaces = "[" + ws + "]+(?![^" + ws + "])|[" + ws + "]+";
  switch (pattern) {
    case SplitPattern::kGpt2:
      return std::string(kContractions) + "| ?[" + letter + "]+| ?[" + number + "]+| ?[^" + ws +
             letter + number + "]+|" + spaces;
    case SplitPattern::kCl100k:
      return std::string("(?i:") + kContractions + ")|[^\\r\\n" + letter + number + "]?[" + letter +
             "]+|[" + number + "]{1,3}| ?[^" + ws + letter + number + "]+[\\r\\n]*|[" + ws +
             "]*[\\r\\n]+|" + spaces;
    case SplitPattern::kO200k: {
      const std::string lead = "[^\\r\\n" + letter + number + "]?";
      const std::string upper = std::string("[") + uc::upper_like() + "]";
      const std::string lower = std::string("[") + uc::lower_like() + "]";
      const std::string suffix = std::string("(?i:") + kContractions + ")?";
      return lead + upper + "*" + lower + "+" + suffix + "|" + lead + upper + "+" + lower + "*" +
             suffix + "|[" + number + "]{1,3}| ?[^" + ws + letter + number + "]+[\\r\\n/]*|[" + ws +
             "]*[\\r\\n]+|" + spaces;
    }
  }
  TRI_ASSERT(false, "unknown split pattern ", static_cast<int>(pattern));
  return {};
}

// One code point, in the group of its class (for classify()).
std::string classes_pattern() {
  return std::string("([") + uc::letters() + "])|([" + uc::numbers() + "])|([" + uc::white_space() +
         "])";
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
  TRI_ASSERT(code != nullptr, "PCRE2 rejected a split pattern at offset ", offset, ": ",
             pcre2_message(error));
  jit = pcre2_jit_compile(code.get(), PCRE2_JIT_COMPLETE) == 0;
  return code;
}

}  // namespace

struct Pretokenizer::Impl {
  explicit Impl(SplitPattern pattern)
      : pieces(compile(pieces_pattern(pattern), pieces_jit)),
        classes(compile(classes_pattern(), classes_jit)) {}
  bool pieces_jit = false, classes_jit = false;
  Code pieces;
  Code classes;

  int match(const pcre2_code* code, bool jit, std::string_view text, size_t start,
            pcre2_match_data* md) const {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    return jit ? pcre2_jit_match(code, subject, text.size(), start, 0, md, nullptr)
               : pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, md, nullptr);
  }
};

std::string_view split_pattern_name(SplitPattern pattern) {
  switch (pattern) {
    case SplitPattern::kGpt2:
      return "gpt2";
    case SplitPattern::kCl100k:
      return "cl100k";
    case SplitPattern::kO200k:
      return "o200k";
  }
  return "?";
}

std::optional<SplitPattern> split_pattern_from_regex(std::string_view regex) {
  // As tiktoken's registry (and tokenizer.json files converted from it) spell them.
  static constexpr std::pair<SplitPattern, std::string_view> kSpellings[] = {
      {SplitPattern::kGpt2,
       R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"},
      {SplitPattern::kCl100k,
       R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
      {SplitPattern::kO200k,
       R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
  };
  for (const auto& [pattern, spelling] : kSpellings)
    if (regex == spelling) return pattern;
  return std::nullopt;
}

Pretokenizer::Pretokenizer(SplitPattern pattern)
    : pattern_(pattern), impl_(std::make_unique<Impl>(pattern)) {}
Pretokenizer::~Pretokenizer() = default;

void Pretokenizer::split(std::string_view text,
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
    TRI_ASSERT(rc > 0 && ovector[0] == pos && ovector[1] > pos, "the ",
               split_pattern_name(pattern_), " pattern did not match at byte ", pos, " of ",
               text.size(), (rc < 0 ? " (PCRE2: " + pcre2_message(rc) + ")" : std::string()));
    on_piece(text.substr(pos, ovector[1] - pos));
    pos = ovector[1];
  }
}

std::vector<std::string_view> Pretokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  split(text, [&](std::string_view piece) { pieces.push_back(piece); });
  return pieces;
}

CharClass Pretokenizer::classify(uint32_t cp) const {
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
