// UTF-8 validation (the GPT-2 tokenizer's input domain) and code-point helpers.
#include "data/utf8.h"

#include <gtest/gtest.h>

#include "core/check.h"

namespace trident::data {
namespace {

TEST(Utf8, AcceptsWellFormedText) {
  EXPECT_FALSE(find_invalid_utf8(""));
  EXPECT_FALSE(find_invalid_utf8("plain ASCII, long enough to use the 8-byte fast path"));
  EXPECT_FALSE(find_invalid_utf8("caf\xC3\xA9 \xE4\xB8\xAD \xF0\x9F\x98\x80"));
  EXPECT_FALSE(find_invalid_utf8("\xEF\xBB\xBF"));               // U+FEFF
  EXPECT_FALSE(find_invalid_utf8("\xED\x9F\xBF"));               // U+D7FF, just below surrogates
  EXPECT_FALSE(find_invalid_utf8("\xEE\x80\x80"));               // U+E000, just above
  EXPECT_FALSE(find_invalid_utf8("\xF4\x8F\xBF\xBF"));           // U+10FFFF
  EXPECT_FALSE(find_invalid_utf8(std::string_view("a\0b", 3)));  // NUL is a character
}

struct BadCase {
  const char* text;
  size_t offset;
  const char* reason_part;
};

TEST(Utf8, RejectsIllFormedTextNamingTheOffset) {
  const BadCase cases[] = {
      {"abc\x80", 3, "continuation byte"},
      {"ok \xC0\xAF", 3, "overlong"},  // overlong '/'
      {"\xC1\xBF", 0, "overlong"},
      {"x\xE0\x80\xAF", 1, "allowed there: 0xA0..0xBF"},     // overlong 3-byte
      {"\xED\xA0\x80", 0, "allowed there: 0x80..0x9F"},      // surrogate U+D800
      {"\xF0\x80\x80\xAF", 0, "allowed there: 0x90..0xBF"},  // overlong 4-byte
      {"\xF4\x90\x80\x80", 0, "allowed there: 0x80..0x8F"},  // U+110000
      {"\xF5\x80\x80\x80", 0, "above U+10FFFF"},
      {"\xFF", 0, "above U+10FFFF"},
      {"12345678\xC3", 8, "text ends after 1 byte"},
      {"\xE4\xB8", 0, "text ends after 2 byte"},
      {"\xC3(", 0, "byte 2 is 0x28"},
      {"\xF0\x9F\x98(", 0, "byte 4 is 0x28"},
  };
  for (const BadCase& c : cases) {
    const auto bad = find_invalid_utf8(c.text);
    ASSERT_TRUE(bad) << c.text;
    EXPECT_EQ(bad->offset, c.offset) << c.text;
    EXPECT_NE(bad->reason.find(c.reason_part), std::string::npos) << bad->reason;
  }
}

TEST(Utf8, EncodesAndDecodesEveryScalarValue) {
  std::string all;
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp)
    if (cp < 0xD800 || cp > 0xDFFF) append_utf8(all, cp);
  EXPECT_FALSE(find_invalid_utf8(all));
  size_t pos = 0;
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    ASSERT_EQ(next_code_point(all, pos), cp);
  }
  EXPECT_EQ(pos, all.size());
  std::string s;
  EXPECT_THROW(append_utf8(s, 0xD800), Error);
  EXPECT_THROW(append_utf8(s, 0x110000), Error);
  EXPECT_EQ(format_code_point(0xE9), "U+00E9");
  EXPECT_EQ(format_code_point(0x1F600), "U+1F600");
}

}  // namespace
}  // namespace trident::data
