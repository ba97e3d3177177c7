// GPT-2's bytes_to_unicode table, built once (see byte_unicode.h for the rule).
#include "data/byte_unicode.h"

#include <array>

#include "data/utf8.h"

namespace trident::data {
namespace {

struct Tables {
  std::array<uint32_t, 256> byte_to_cp{};
  std::array<int16_t, 324> cp_to_byte{};  // symbols are < U+0100 + 68 = U+0144; -1: none

  Tables() {
    cp_to_byte.fill(-1);
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    uint32_t next_extra = 0x100;
    for (int b = 0; b < 256; ++b) {
      byte_to_cp[b] = printable(b) ? static_cast<uint32_t>(b) : next_extra++;
      cp_to_byte[byte_to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t byte_to_symbol(uint8_t b) {
  return tables().byte_to_cp[b];
}

std::optional<uint8_t> symbol_to_byte(uint32_t cp) {
  const auto& t = tables().cp_to_byte;
  if (cp >= t.size() || t[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(t[cp]);
}

std::optional<std::string> symbols_to_bytes(std::string_view symbols) {
  std::string bytes;
  bytes.reserve(symbols.size());
  for (size_t pos = 0; pos < symbols.size();) {
    const std::optional<uint8_t> b = symbol_to_byte(next_code_point(symbols, pos));
    if (!b) return std::nullopt;
    bytes.push_back(static_cast<char>(*b));
  }
  return bytes;
}

std::optional<uint32_t> first_non_symbol(std::string_view symbols) {
  for (size_t pos = 0; pos < symbols.size();) {
    const uint32_t cp = next_code_point(symbols, pos);
    if (!symbol_to_byte(cp)) return cp;
  }
  return std::nullopt;
}

std::string bytes_to_symbols(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(out, byte_to_symbol(static_cast<uint8_t>(c)));
  return out;
}

}  // namespace trident::data
