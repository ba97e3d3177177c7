#include "core/crc32c.h"

#include <array>
#include <bit>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace trident::core {

// Note [Why CRC-32C]
// Why CRC-32C rather than xxh64 (or a cryptographic hash)? The checksum only has to catch
// accidents (torn writes, truncation, flipped bits), and CRC-32C is the checksum storage
// systems already use for that (leveldb/RocksDB blocks, ext4 and btrfs metadata, iSCSI, Google
// Cloud Storage objects), so a checkpoint's checksums can be compared with `gsutil hash -c` and
// any CRC-32C tool. It is a single instruction on x86 (SSE4.2) and ARMv8, detects every burst
// error up to 32 bits, and needs a 2 KiB table as its portable fallback, where xxh64 needs a
// page of subtle code. The hardware path here is one dependent crc32 chain, about 8 bytes per
// 3 cycles (~8 GB/s at 3 GHz), faster than the disks checkpoints live on; three interleaved
// chains would triple it, at the cost of a carry-less-multiply combine step.
// On other CPUs the portable table runs (~1-2 GB/s); ARMv8's crc32c instructions are not used
// yet because no ARM machine tests them.

namespace {

constexpr uint32_t kPolyReflected = 0x82F63B78u;  // 0x1EDC6F41 bit-reversed

// kTables[k][b]: the CRC contribution of byte b followed by k zero bytes (slicing-by-8).
constexpr std::array<std::array<uint32_t, 256>, 8> make_tables() {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c >> 1) ^ ((c & 1u) ? kPolyReflected : 0u);
    t[0][b] = c;
  }
  for (int k = 1; k < 8; ++k)
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFFu];
  return t;
}
constexpr auto kTables = make_tables();

static_assert(std::endian::native == std::endian::little,
              "the 8-byte CRC steps load words little-endian");

uint64_t load_le64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

namespace detail {

uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    const uint64_t v = load_le64(p) ^ c;
    c = kTables[7][v & 0xFF] ^ kTables[6][(v >> 8) & 0xFF] ^ kTables[5][(v >> 16) & 0xFF] ^
        kTables[4][(v >> 24) & 0xFF] ^ kTables[3][(v >> 32) & 0xFF] ^ kTables[2][(v >> 40) & 0xFF] ^
        kTables[1][(v >> 48) & 0xFF] ^ kTables[0][v >> 56];
  }
  for (; n > 0; --n, ++p) c = (c >> 8) ^ kTables[0][(c ^ *p) & 0xFF];
  return ~c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc32c_extend_hardware(uint32_t crc, const void* data,
                                                                  size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) c = _mm_crc32_u64(c, load_le64(p));
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; n > 0; --n, ++p) c32 = _mm_crc32_u8(c32, *p);
  return ~c32;
}

bool crc32c_hardware_available() {
  static const bool available = __builtin_cpu_supports("sse4.2");
  return available;
}
#else
uint32_t crc32c_extend_hardware(uint32_t crc, const void* data, size_t n) {
  return crc32c_extend_portable(crc, data, n);
}
bool crc32c_hardware_available() {
  return false;
}
#endif

}  // namespace detail

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n) {
  if (detail::crc32c_hardware_available()) return detail::crc32c_extend_hardware(crc, data, n);
  return detail::crc32c_extend_portable(crc, data, n);
}

std::string crc32c_to_hex(uint32_t crc) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(8, '0');
  for (int i = 7; i >= 0; --i, crc >>= 4) s[i] = kDigits[crc & 0xF];
  return s;
}

std::optional<uint32_t> crc32c_from_hex(std::string_view hex) {
  if (hex.size() != 8) return std::nullopt;
  uint32_t v = 0;
  for (char ch : hex) {
    uint32_t d;
    if (ch >= '0' && ch <= '9') {
      d = static_cast<uint32_t>(ch - '0');
    } else if (ch >= 'a' && ch <= 'f') {
      d = static_cast<uint32_t>(ch - 'a' + 10);
    } else {
      return std::nullopt;
    }
    v = (v << 4) | d;
  }
  return v;
}

}  // namespace trident::core
