// GPT-2's pre-tokenization: splitting text into the pieces that BPE then encodes one by one,
// with tiktoken's `gpt2` pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// matched repeatedly from the start of the text (leftmost alternative wins, each repeat is
// greedy), compiled with PCRE2 (UTF, JIT).
//
// Note [Unicode classes of the GPT-2 pattern]
// tiktoken's regex is Rust's (fancy-regex on the regex crate), so its classes are Unicode
// properties of the regex crate's tables; the npm build tiktoken 1.0.22 has Unicode 16.0 tables
// (checked by locating them in its WebAssembly binary). PCRE2 is matched to them:
// - \s: Rust's \s is the White_Space property, 25 code points. PCRE2's \s in UCP mode also
//   matches U+180E MONGOLIAN VOWEL SEPARATOR (it is \p{Z} plus \h and \v, and \h lists
//   U+180E; Unicode made it Cf in 6.3), and tiktoken does not treat U+180E as space. So the
//   pattern spells White_Space out instead of writing \s.
// - \p{L}, \p{N}: PCRE2 10.42 (Debian 12) has Unicode 14.0 tables. The code points that
//   Unicode 15.0-16.0 assigned as letters (9,272) or numbers (120), which PCRE2 10.42 sees as
//   unassigned, are added to the classes explicitly (a newer PCRE2 already has them; adding
//   them again changes nothing). No code point changed between letter, number and other in
//   those versions, so nothing needs removing. Characters new in Unicode 17 are "other" for
//   tiktoken 1.0.22; a PCRE2 with Unicode 17 tables would call them letters.
// The golden test (tests/data/gpt2_tokenizer_test.cc) has strings with such code points, and
// an exhaustive test compares every code point against tiktoken when given its output.
//
// Not here: special tokens (split off before this runs, data/gpt2_tokenizer.cc) and BPE.
// Thread safety: split() may be called from many threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

namespace trident::data {

// The class the pattern gives one code point (for tests and diagnostics).
enum class CharClass { kLetter, kNumber, kWhiteSpace, kOther };

class Gpt2Pretokenizer {
 public:
  // Compiles the pattern (throws trident::Error if PCRE2 rejects it: a trident bug).
  Gpt2Pretokenizer();
  ~Gpt2Pretokenizer();
  Gpt2Pretokenizer(const Gpt2Pretokenizer&) = delete;
  Gpt2Pretokenizer& operator=(const Gpt2Pretokenizer&) = delete;

  // Calls on_piece for each piece of `text` in order; the pieces concatenate to `text`.
  // `text` must be valid UTF-8 (data/utf8.h: find_invalid_utf8); it is not checked again.
  void split(std::string_view text, const std::function<void(std::string_view)>& on_piece) const;
  std::vector<std::string_view> split(std::string_view text) const;

  // The class of code point cp in the pattern (cp must be a Unicode scalar value).
  CharClass classify(uint32_t cp) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trident::data
