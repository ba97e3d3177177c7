// UTF-8 validation and code-point encoding for the tokenizers.
//
// Valid UTF-8 is what the Unicode standard (chapter 3, table 3-7) and Python's str allow:
// shortest-form sequences of scalar values, so overlong forms, surrogates (U+D800..U+DFFF) and
// values above U+10FFFF are invalid. This is the input domain of tiktoken, whose encode()
// takes a Python str, so it is the input domain of the GPT-2 tokenizer too.
// Not here: normalization, case mapping, grapheme segmentation (the tokenizers need none).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace trident::data {

// The first invalid sequence of `text`, if any.
struct Utf8Error {
  size_t offset;       // byte offset of the first byte of the invalid sequence
  std::string reason;  // e.g. "byte 0xC3 starts a 2-byte sequence but the text ends"
};
std::optional<Utf8Error> find_invalid_utf8(std::string_view text);

// Appends the UTF-8 encoding of a scalar value (code_point <= 0x10FFFF, not a surrogate).
void append_utf8(std::string& out, uint32_t code_point);

// "U+00E9": the conventional name of a code point, for messages.
std::string format_code_point(uint32_t code_point);

// Decodes the code point starting at text[pos] and advances pos past it. `text` must be valid
// UTF-8 (checked with find_invalid_utf8 first); pos must be < text.size().
uint32_t next_code_point(std::string_view text, size_t& pos);

}  // namespace trident::data
