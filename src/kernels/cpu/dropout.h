// Dropout with a counter-based mask, on contiguous buffers of n elements:
//   out[i] = in[i] * (keep(i) ? 1 / (1 - p) : 0)        semantics `=`, out may alias in
// for 0 <= p < 1. The mask is a pure function of (seed, offset, i), so it is never stored:
// backward applies the same function to the output gradient (d out[i] / d in[i] is the
// multiplier), regenerating the mask. Dropped elements are multiplied by zero rather than
// overwritten, so a NaN input stays NaN, as in PyTorch.
//
// Note [Dropout mask]
// Element i (the row-major index) draws 24 bits from Philox4x32-10 (core/rng.h):
//   counter(i) = offset + i / 4,   bits(i) = philox4x32(seed, counter(i))[i % 4],
//   keep(i)    = uniform_from_bits(bits(i)) >= p,  i.e.  (bits(i) >> 8) >= ceil(p * 2^24).
// One Philox call yields four 32-bit words and each feeds one element, so a mask of n
// elements uses ceil(n / 4) counters (what the caller reserves from its Generator) and costs
// a quarter of a Philox call per element (one counter per element would draw four times as
// many bits for the same mask statistics; Philox dominates the kernel's time). The 24-bit
// uniform takes values k / 2^24, so the probability of dropping is ceil(p * 2^24) / 2^24:
// p itself, up to 2^-24.
#pragma once

#include <cstdint>

namespace trident::kernels::cpu {

// Counters a mask of n elements consumes from the Generator.
inline constexpr int64_t dropout_counters(int64_t n) {
  return (n + 3) / 4;
}

// T is float, double, bf16 or f16; computes in acc_t<T>, rounds once on store.
template <class T>
void dropout_forward(T* out, const T* in, int64_t n, double p, uint64_t seed, uint64_t offset);

}  // namespace trident::kernels::cpu
