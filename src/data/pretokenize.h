// Pre-tokenization: splitting text into the pieces that BPE then encodes one by one, with one
// of tiktoken's split patterns, matched repeatedly from the start of the text (leftmost
// alternative wins, each repeat is greedy), compiled with PCRE2 (UTF, UCP, JIT):
//   kGpt2   (gpt2, r50k, p50k; GPT-2's tokenizer.json: ByteLevel with use_regex)
//     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   kCl100k (cl100k_base; Llama 3's tokenizer.model and tokenizer.json use the same string)
//     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//     \s*[\r\n]+|\s+(?!\S)|\s+
//   kO200k  (o200k_base)
//     [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|...)?|
//     [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|...)?|
//     \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// Note [Unicode classes of the split patterns]
// tiktoken's regex is Rust's (fancy-regex on the regex crate), so its classes are Unicode
// properties of the regex crate's tables; the npm build tiktoken 1.0.22 has Unicode 16.0 tables
// (checked by locating them in its WebAssembly binary). PCRE2 is matched to them:
// - \s: Rust's \s is the White_Space property, 25 code points. PCRE2's \s in UCP mode also
//   matches U+180E MONGOLIAN VOWEL SEPARATOR (it is \p{Z} plus \h and \v, and \h lists
//   U+180E; Unicode made it Cf in 6.3), and tiktoken does not treat U+180E as space. So the
//   patterns spell White_Space out instead of writing \s.
// - \p{L}, \p{N} and o200k's run classes (\p{Lu}, \p{Ll}, \p{Lt}, \p{Lm}, \p{Lo}, \p{M}):
//   PCRE2 10.42 (Debian 12) has Unicode 14.0 tables. The code points Unicode 15.0-16.0 put in
//   each class (9,272 letters, 120 numbers, 93 marks, split between the run classes by their
//   category), which PCRE2 10.42 sees as unassigned, are added to the classes explicitly
//   (data/unicode_classes.h; a newer PCRE2 already has them, and adding them again changes
//   nothing). We add per class the pattern uses, not per category, because only the unions
//   matter: o200k's "upper-like" run class is Lu|Lt|Lm|Lo|M and its "lower-like" one
//   Ll|Lm|Lo|M, and a mark is in both but not in \p{L}. No code point left any of these classes
//   between 14.0 and 16.0 (scripts/unicode-class-additions.mjs checks it), so nothing needs
//   removing. Characters new in Unicode 17 are unassigned ("other") for tiktoken 1.0.22; a PCRE2
//   with Unicode 17 tables would classify them.
// - (?i:'s|...): Rust's case-insensitive matching uses Unicode simple case folding, so 'S and
//   also U+017F LATIN SMALL LETTER LONG S match 's; PCRE2 in UTF mode folds the same way (its
//   caseless sets include s, S and U+017F). The reference tests have such strings.
// The golden tests (tests/data/gpt2_tokenizer_test.cc, tests/data/tiktoken_tokenizer_test.cc)
// have strings with such code points, and an exhaustive test compares every code point
// against tiktoken's gpt2 when given its output.
//
// Not here: special tokens (split off before this runs) and BPE.
// Thread safety: split() may be called from many threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace trident::data {

enum class SplitPattern { kGpt2, kCl100k, kO200k };

// "gpt2", "cl100k", "o200k": for names and messages.
std::string_view split_pattern_name(SplitPattern pattern);

// The pattern whose tiktoken/Hugging Face spelling (pat_str, or a tokenizer.json Split's
// Regex) is exactly `regex`, if it is one of the three.
std::optional<SplitPattern> split_pattern_from_regex(std::string_view regex);

// The class the GPT-2 pattern gives one code point (for tests and diagnostics).
enum class CharClass { kLetter, kNumber, kWhiteSpace, kOther };

class Pretokenizer {
 public:
  // Compiles the pattern (throws trident::Error if PCRE2 rejects it: a trident bug).
  explicit Pretokenizer(SplitPattern pattern = SplitPattern::kGpt2);
  ~Pretokenizer();
  Pretokenizer(const Pretokenizer&) = delete;
  Pretokenizer& operator=(const Pretokenizer&) = delete;

  SplitPattern pattern() const { return pattern_; }

  // Calls on_piece for each piece of `text` in order; the pieces concatenate to `text`.
  // `text` must be valid UTF-8 (data/utf8.h: find_invalid_utf8); it is not checked again.
  void split(std::string_view text, const std::function<void(std::string_view)>& on_piece) const;
  std::vector<std::string_view> split(std::string_view text) const;

  // The class of code point cp in the patterns (cp must be a Unicode scalar value).
  CharClass classify(uint32_t cp) const;

 private:
  struct Impl;
  SplitPattern pattern_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trident::data
