#include "core/rng.h"

#include <cmath>
#include <numbers>

#include "core/factory.h"
#include "core/parallel.h"

namespace trident {

std::array<uint32_t, 4> philox4x32(uint64_t seed, uint64_t counter) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += kW0;
    k1 += kW1;
  }
  return {c0, c1, c2, c3};
}

namespace {

// Fills a contiguous f64 buffer with fn(i, philox(seed, first + i)) in parallel.
template <class Fn>
Tensor generate(const Shape& shape, Generator& gen, const Fn& fn) {
  Tensor out = empty(shape, DType::kF64);
  double* p = out.data_ptr<double>();
  const int64_t n = out.numel();
  const uint64_t seed = gen.seed(), first = gen.reserve(static_cast<uint64_t>(n));
  parallel_for(0, n, 16384, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) p[i] = fn(philox4x32(seed, first + static_cast<uint64_t>(i)));
  });
  return out;
}

}  // namespace

void uniform_(const Tensor& t, Generator& gen, double low, double high) {
  check_floating(t, "uniform_");
  TRI_CHECK(low < high, "uniform_: low (", low, ") must be < high (", high, ")");
  core::copy_(t, generate(t.shape(), gen, [&](const std::array<uint32_t, 4>& r) {
          return low + (high - low) * uniform_from_bits64(r[0], r[1]);
        }));
}

void normal_(const Tensor& t, Generator& gen, double mean, double stddev) {
  check_floating(t, "normal_");
  TRI_CHECK(stddev >= 0, "normal_: stddev must be >= 0, got ", stddev);
  // Box-Muller on two 53-bit uniforms; u1 in (0, 1] so the log is finite.
  core::copy_(t, generate(t.shape(), gen, [&](const std::array<uint32_t, 4>& r) {
          const double u1 = 1.0 - uniform_from_bits64(r[0], r[1]);
          const double u2 = uniform_from_bits64(r[2], r[3]);
          return mean + stddev * std::sqrt(-2.0 * std::log(u1)) *
                            std::cos(2.0 * std::numbers::pi * u2);
        }));
}

Tensor rand(const Shape& shape, Generator& gen, DType dtype) {
  Tensor t = empty(shape, dtype);
  uniform_(t, gen);
  return t;
}

Tensor randn(const Shape& shape, Generator& gen, DType dtype) {
  Tensor t = empty(shape, dtype);
  normal_(t, gen);
  return t;
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator& gen, DType dtype) {
  TRI_CHECK(low < high, "randint: low (", low, ") must be < high (", high, ")");
  TRI_CHECK_TYPE(is_integral(dtype), "randint: dtype must be an integer type, got ", dtype);
  const double range = static_cast<double>(high - low);
  Tensor v = generate(shape, gen, [&](const std::array<uint32_t, 4>& r) {
    return std::floor(static_cast<double>(low) + range * uniform_from_bits64(r[0], r[1]));
  });
  return core::cast(v, dtype);
}

}  // namespace trident
