// CRC-32C (Castagnoli polynomial 0x1EDC6F41, reflected, initial and final XOR 0xFFFFFFFF):
// the checksum of every file in a checkpoint manifest.
//
// Uses the SSE4.2 crc32 instruction when the CPU has it (checked once at run time), else a
// portable slicing-by-8 table. Both give identical results; tests compare them.
// See Note [Why CRC-32C] in crc32c.cc.
//
// Not here: cryptographic integrity (CRC detects accidents, not tampering), or combining the
// CRCs of separately checksummed pieces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace trident::core {

// The CRC of (the data `crc` was computed over) followed by data[0, n). crc32c_extend(0, ...)
// starts a new checksum, so crc32c_extend(crc32c(a), b) == crc32c(a + b).
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n);

inline uint32_t crc32c(const void* data, size_t n) {
  return crc32c_extend(0, data, n);
}
inline uint32_t crc32c(std::string_view data) {
  return crc32c(data.data(), data.size());
}

// How checksums are written in manifests: exactly 8 lowercase hex digits ("e3069283").
std::string crc32c_to_hex(uint32_t crc);
std::optional<uint32_t> crc32c_from_hex(std::string_view hex);

namespace detail {
// The two implementations behind crc32c_extend, exposed so tests can compare them.
uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t n);
// Only callable when crc32c_hardware_available().
uint32_t crc32c_extend_hardware(uint32_t crc, const void* data, size_t n);
bool crc32c_hardware_available();
}  // namespace detail

}  // namespace trident::core
