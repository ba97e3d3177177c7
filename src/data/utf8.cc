// UTF-8 validation, following the table of well-formed byte sequences (Unicode 15, table 3-7).
#include "data/utf8.h"

#include <cstdio>
#include <cstring>

#include "core/check.h"

namespace trident::data {
namespace {

std::string hex_byte(unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "0x%02X", b);
  return buf;
}

// Length of the ASCII prefix of [p, p + n), 8 bytes at a time.
size_t ascii_prefix(const unsigned char* p, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t word;
    std::memcpy(&word, p + i, 8);
    if (word & 0x8080808080808080ull) break;
  }
  while (i < n && p[i] < 0x80) ++i;
  return i;
}

}  // namespace

std::optional<Utf8Error> find_invalid_utf8(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    i += ascii_prefix(p + i, n - i);
    if (i >= n) break;
    const unsigned char b = p[i];
    // Sequence length and the allowed range of the second byte (table 3-7): the narrowed
    // ranges after E0, ED, F0 and F4 exclude overlong forms, surrogates and values > U+10FFFF.
    int len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    } else {
      const char* why = b < 0xC0   ? " is a continuation byte with no lead byte before it"
                        : b < 0xC2 ? " would start an overlong 2-byte sequence"
                                   : " can never appear in UTF-8 (it would encode a value above "
                                     "U+10FFFF)";
      return Utf8Error{i, "byte " + hex_byte(b) + why};
    }
    for (int k = 1; k < len; ++k) {
      if (i + k >= n)
        return Utf8Error{i, "byte " + hex_byte(b) + " starts a " + std::to_string(len) +
                                "-byte sequence but the text ends after " + std::to_string(k) +
                                " byte(s)"};
      const unsigned char c = p[i + k];
      const unsigned char allowed_lo = k == 1 ? lo : 0x80, allowed_hi = k == 1 ? hi : 0xBF;
      if (c < allowed_lo || c > allowed_hi)
        return Utf8Error{i, "byte " + hex_byte(b) + " starts a " + std::to_string(len) +
                                "-byte sequence, but byte " + std::to_string(k + 1) + " is " +
                                hex_byte(c) + " (allowed there: " + hex_byte(allowed_lo) + ".." +
                                hex_byte(allowed_hi) + ")"};
    }
    i += len;
  }
  return std::nullopt;
}

void append_utf8(std::string& out, uint32_t cp) {
  TRI_CHECK(cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF), "append_utf8: ", format_code_point(cp),
            " is not a Unicode scalar value");
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string format_code_point(uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "U+%04X", cp);
  return buf;
}

uint32_t next_code_point(std::string_view text, size_t& pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const unsigned char b = p[pos];
  const int len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  TRI_ASSERT(pos + len <= text.size(), "next_code_point on invalid UTF-8 at byte ", pos);
  uint32_t cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
  for (int k = 1; k < len; ++k) cp = (cp << 6) | (p[pos + k] & 0x3F);
  pos += len;
  return cp;
}

}  // namespace trident::data
