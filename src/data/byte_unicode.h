// GPT-2's byte-to-unicode alphabet: how vocab.json and merges.txt write raw bytes as text.
//
// GPT-2's encoder.py (`bytes_to_unicode`) maps each of the 256 byte values to one printable
// code point, so that every token (a byte string) can be stored as a JSON string and merges
// can be split on spaces: the 188 bytes that are printable Latin-1 other than space and soft
// hyphen ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) stand for themselves, and the other 68
// (controls, space, U+00A0, U+00AD, ...) map in increasing order to U+0100, U+0101, ... So a
// space is written U+0120 'Ġ' and a newline U+010A 'Ċ'.
// This file only converts between the two spellings; it does not tokenize.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace trident::data {

// The code point that stands for byte b.
uint32_t byte_to_symbol(uint8_t b);
// The byte that code point cp stands for, or nullopt if cp is not one of the 256 symbols.
std::optional<uint8_t> symbol_to_byte(uint32_t cp);

// The bytes a token spelled in symbols stands for ("Ġthe" -> " the"). `symbols` must be valid
// UTF-8. Returns nullopt if a code point is not a symbol; first_non_symbol names it.
std::optional<std::string> symbols_to_bytes(std::string_view symbols);
std::optional<uint32_t> first_non_symbol(std::string_view symbols);

// The symbol spelling of a byte string (" the" -> "Ġthe"), as UTF-8.
std::string bytes_to_symbols(std::string_view bytes);

}  // namespace trident::data
