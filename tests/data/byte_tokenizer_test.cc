// The byte-level tokenizer: id = byte, any bytes, lossless.
#include "data/byte_tokenizer.h"

#include <gtest/gtest.h>

#include "core/check.h"

namespace trident::data {
namespace {

TEST(ByteTokenizer, IdsAreBytesAndRoundTripAnyBytes) {
  ByteTokenizer t;
  EXPECT_EQ(t.vocab_size(), 256);
  EXPECT_FALSE(t.eot_id().has_value());
  EXPECT_EQ(t.encode("Hi\n"), (std::vector<TokenId>{72, 105, 10}));
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::vector<TokenId> ids = t.encode(all + "\xC3(not UTF-8");
  EXPECT_EQ(ids[255], 255u);
  EXPECT_EQ(t.decode(ids), all + "\xC3(not UTF-8");
  // No special tokens: allow_special changes nothing.
  EXPECT_EQ(t.encode("<|endoftext|>", true), t.encode("<|endoftext|>", false));
}

TEST(ByteTokenizer, DecodeRejectsIdsAbove255) {
  ByteTokenizer t;
  try {
    (void)t.decode(std::vector<TokenId>{65, 256});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIndex);
    EXPECT_NE(e.message().find("id 256 at position 1"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace trident::data
