// Compiled with -ffp-contract=off: see Note [ggml's rounding without fused multiply-adds].
#include "kernels/cpu/ggml_blocks.h"

#include <algorithm>
#include <cmath>

#include "core/dtype.h"
#include "core/half.h"

namespace trident::kernels::cpu {
namespace {

// quantize_row_q8_0_ref, one block.
void quantize_q8_0(const float* x, uint8_t* qs, uint16_t* d_bits) {
  float amax = 0.0f;
  for (int64_t j = 0; j < kGgmlBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_bits = f16::round_from_float(d);
  for (int64_t j = 0; j < kGgmlBlock; ++j) qs[j] = static_cast<uint8_t>(static_cast<int8_t>(std::roundf(x[j] * id)));
}

// quantize_row_q4_0_ref, one block.
void quantize_q4_0(const float* x, uint8_t* qs, uint16_t* d_bits) {
  float amax = 0.0f, max = 0.0f;
  for (int64_t j = 0; j < kGgmlBlock; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_bits = f16::round_from_float(d);
  for (int64_t j = 0; j < kGgmlBlock / 2; ++j) {
    const float x0 = x[j] * id, x1 = x[kGgmlBlock / 2 + j] * id;
    const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(x0 + 8.5f)));
    const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(x1 + 8.5f)));
    qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}

}  // namespace

const char* ggml_block_type_name(GgmlBlockType t) { return t == GgmlBlockType::kQ8_0 ? "Q8_0" : "Q4_0"; }

void ggml_quantize_blocks(GgmlBlockType t, const float* x, int64_t n, uint8_t* codes, uint16_t* scales) {
  const int64_t code_bytes = ggml_code_bytes(t);
  for (int64_t b = 0; b < n / kGgmlBlock; ++b) {
    if (t == GgmlBlockType::kQ8_0) quantize_q8_0(x + b * kGgmlBlock, codes + b * code_bytes, scales + b);
    else quantize_q4_0(x + b * kGgmlBlock, codes + b * code_bytes, scales + b);
  }
}

template <class T>
void ggml_dequantize(GgmlBlockType t, const uint8_t* codes, const uint16_t* scales, int64_t begin, int64_t end, T* out) {
  const int64_t code_bytes = ggml_code_bytes(t);
  float block[kGgmlBlock];
  for (int64_t i = begin; i < end;) {
    const int64_t b = i / kGgmlBlock, first = i - b * kGgmlBlock, stop = std::min(end, (b + 1) * kGgmlBlock);
    const float d = f16::to_float(scales[b]);
    const uint8_t* qs = codes + b * code_bytes;
    // A whole block in straight loops the compiler vectorizes (prefill dequantizes every weight).
    if (t == GgmlBlockType::kQ8_0) {
      for (int64_t j = 0; j < kGgmlBlock; ++j) block[j] = static_cast<float>(static_cast<int8_t>(qs[j])) * d;
    } else {
      for (int64_t j = 0; j < kGgmlBlock / 2; ++j) {
        block[j] = static_cast<float>((qs[j] & 15) - 8) * d;
        block[j + kGgmlBlock / 2] = static_cast<float>((qs[j] >> 4) - 8) * d;
      }
    }
    for (int64_t j = first; j < stop - b * kGgmlBlock; ++j) out[b * kGgmlBlock + j - begin] = static_cast<T>(block[j]);
    i = stop;
  }
}

#define TRI_INSTANTIATE(T) \
  template void ggml_dequantize<T>(GgmlBlockType, const uint8_t*, const uint16_t*, int64_t, int64_t, T*);
TRI_FOR_EACH_FLOATING_TYPE(TRI_INSTANTIATE)
#undef TRI_INSTANTIATE

}  // namespace trident::kernels::cpu
