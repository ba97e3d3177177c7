// Random numbers: Philox4x32-10, a counter-based generator (Salmon et al., SC'11; the one
// cuRAND and PyTorch's CUDA backend use). Value i of a draw depends only on (seed, offset + i),
// so results are the same for any thread count, and a dropout mask can be regenerated in
// backward from (seed, offset) instead of being stored.
#pragma once

#include <array>
#include <cstdint>

#include "core/tensor.h"

namespace trident {

std::array<uint32_t, 4> philox4x32(uint64_t seed, uint64_t counter);

// Uniform in [0, 1) from 24 random bits (exactly representable in f32).
inline float uniform_from_bits(uint32_t bits) { return static_cast<float>(bits >> 8) * 0x1p-24f; }
// Uniform in [0, 1) with 53 random bits.
inline double uniform_from_bits64(uint32_t hi, uint32_t lo) {
  return static_cast<double>(((static_cast<uint64_t>(hi) << 32) | lo) >> 11) * 0x1p-53;
}

// A seed plus a running offset. Each draw reserves a range of counters and advances the
// offset past it, so consecutive draws are independent and a run is reproducible from the
// seed. The state is two integers: save and restore it to resume bit-identically.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) {
    seed_ = seed;
    offset_ = offset;
  }
  // Reserves n counters and returns the first.
  uint64_t reserve(uint64_t n) {
    const uint64_t first = offset_;
    offset_ += n;
    return first;
  }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// In-place fills of a floating tensor (any strides).
void uniform_(const Tensor& t, Generator& gen, double low = 0.0, double high = 1.0);
void normal_(const Tensor& t, Generator& gen, double mean = 0.0, double stddev = 1.0);

Tensor rand(const Shape& shape, Generator& gen, DType dtype = DType::kF32);   // U[0, 1)
Tensor randn(const Shape& shape, Generator& gen, DType dtype = DType::kF32);  // N(0, 1)
// Integers uniform in [low, high), as i64.
Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator& gen,
               DType dtype = DType::kI64);

}  // namespace trident
