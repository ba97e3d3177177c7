// Rotary position embedding's frequencies (kernels/cpu/rope.h): pair i of a head of D dims turns
// by position x inv_freq(i), inv_freq(i) = theta^(-2i/D), optionally rescaled as Llama 3
// (rope_scaling type "llama3", Hugging Face's _compute_llama3_parameters): with wavelength
// w = 2 pi / inv_freq, frequencies whose w exceeds original_max_position / low_freq_factor are
// divided by `factor`, those below original_max_position / high_freq_factor are kept, and
// those between blend the two by s = (original_max_position / w - low_freq_factor) /
// (high_freq_factor - low_freq_factor): (1 - s) inv_freq / factor + s inv_freq.
// Plain data, so a CUDA kernel takes it by value and computes the same frequencies.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define TRI_HOST_DEVICE __host__ __device__
#else
#define TRI_HOST_DEVICE
#endif

namespace trident {

struct RopeParams {
  double theta = 10000.0;  // the base (10000 in LLaMA 1/2, 500000 in Llama 3)
  // Llama 3's scaling; factor 0: none.
  double factor = 0.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position = 8192;

  RopeParams() = default;
  // A plain base: RoPE without scaling (implicit: `rope(x, 10000.0)` reads as before).
  RopeParams(double base) : theta(base) {}  // NOLINT(google-explicit-constructor)
  bool scaled() const { return factor != 0.0; }
};

// inv_freq of pair i (i < D/2) of a head of D dims, in double.
TRI_HOST_DEVICE inline double rope_inv_freq(const RopeParams& p, int64_t i, int64_t D) {
  const double inv = ::pow(p.theta, -2.0 * static_cast<double>(i) / static_cast<double>(D));
  if (p.factor == 0.0) return inv;
  const double wavelen = 2.0 * 3.14159265358979323846 / inv;
  const double old_len = static_cast<double>(p.original_max_position);
  if (wavelen < old_len / p.high_freq_factor) return inv;           // high frequencies: kept
  if (wavelen > old_len / p.low_freq_factor) return inv / p.factor;  // low frequencies: scaled
  const double s = (old_len / wavelen - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor);
  return (1.0 - s) * inv / p.factor + s * inv;
}

}  // namespace trident
