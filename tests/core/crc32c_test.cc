#include "core/crc32c.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace trident::core {
namespace {

// Published test vectors: the CRC catalogue's check value for "123456789" and the iSCSI
// vectors of RFC 3720, appendix B.4.
TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  std::string zeros(32, '\0'), ones(32, '\xff'), up(32, '\0'), down(32, '\0');
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<char>(i);
    down[i] = static_cast<char>(31 - i);
  }
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones), 0x62A8AB43u);
  EXPECT_EQ(crc32c(up), 0x46DD794Eu);
  EXPECT_EQ(crc32c(down), 0x113FDB5Cu);
}

TEST(Crc32c, HardwareAndPortableAgreeAtEveryLengthAndAlignment) {
  std::string data(300, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + 7);
  for (size_t start = 0; start < 9; ++start) {
    for (size_t n = 0; start + n <= data.size(); n += (n < 40 ? 1 : 37)) {
      const uint32_t portable = detail::crc32c_extend_portable(0, data.data() + start, n);
      EXPECT_EQ(crc32c(data.data() + start, n), portable) << start << " " << n;
      if (detail::crc32c_hardware_available()) {
        EXPECT_EQ(detail::crc32c_extend_hardware(0, data.data() + start, n), portable);
      }
    }
  }
}

TEST(Crc32c, ExtendIsConcatenation) {
  const std::string a = "hello, ", b = "checkpoint world";
  EXPECT_EQ(crc32c_extend(crc32c(a), b.data(), b.size()), crc32c(a + b));
  EXPECT_EQ(detail::crc32c_extend_portable(crc32c(a), b.data(), b.size()), crc32c(a + b));
}

TEST(Crc32c, HexRoundTrip) {
  EXPECT_EQ(crc32c_to_hex(0xE3069283u), "e3069283");
  EXPECT_EQ(crc32c_to_hex(0x1u), "00000001");
  EXPECT_EQ(crc32c_from_hex("e3069283"), 0xE3069283u);
  EXPECT_EQ(crc32c_from_hex("E3069283"), std::nullopt);  // one spelling only
  EXPECT_EQ(crc32c_from_hex("e306928"), std::nullopt);
  EXPECT_EQ(crc32c_from_hex("e30692830"), std::nullopt);
  EXPECT_EQ(crc32c_from_hex("e306928g"), std::nullopt);
}

}  // namespace
}  // namespace trident::core
