// GGUF's Q8_0 and Q4_0 block formats on the host: quantization as ggml's reference quantizers
// do it (ggml-quants.c: quantize_row_q8_0_ref, quantize_row_q4_0_ref), bit for bit, and
// dequantization. A weight is quantized row by row along its input dimension, in blocks of 32
// consecutive values; each block keeps one fp16 scale d and 32 codes:
//   Q8_0  d = absmax / 127, q = roundf(x / d) (int8); value q d.            34 bytes / 32 weights
//   Q4_0  d = max / -8 (max: the signed value of largest magnitude), q = min(15, (int8)(x / d +
//         8.5)) (4 bits); value (q - 8) d. Byte j of a block's 16 holds q[j] in its low nibble
//         and q[j + 16] in its high nibble.                                   18 bytes / 32 weights
// (x / d is x times the fp32 reciprocal of the fp32 d, as ggml computes it; the stored d is that
// d rounded to fp16, to nearest even.) The codes and the scales are kept as two arrays, each
// block's bytes exactly ggml's block_q8_0.qs / block_q4_0.qs and its d's bits: a GGUF tensor is
// the blocks {d, qs} back to back, so writing one is a copy (Note [Codes and scales apart] in
// quantization/ggml_weight.h).
//
// Note [ggml's rounding without fused multiply-adds]
// Q4_0's code rounds x * id + 8.5 in two float operations. A compiler may fuse them into one
// multiply-add (GCC does at -march=native unless told not to), which rounds once and can give
// another code where x * id + 8.5 lies within an ulp of an integer; ggml built with the same
// flags would too, so its "reference" depends on its build. trident computes the two roundings
// (this file is compiled with -ffp-contract=off, src/CMakeLists.txt), the result of the C code
// on any IEEE machine without contraction; the tests' transcription of ggml's code is exact by
// the same rule.
#pragma once

#include <cstdint>

namespace trident::kernels::cpu {

enum class GgmlBlockType { kQ8_0, kQ4_0 };
inline constexpr int64_t kGgmlBlock = 32;  // weights per block (QK8_0, QK4_0)

// Bytes of codes per block: 32 (Q8_0), 16 (Q4_0).
constexpr int64_t ggml_code_bytes(GgmlBlockType t) { return t == GgmlBlockType::kQ8_0 ? 32 : 16; }
// "Q8_0", "Q4_0".
const char* ggml_block_type_name(GgmlBlockType t);

// n values (a multiple of kGgmlBlock, finite) into n / 32 blocks: codes (n / 32 x
// ggml_code_bytes) and scales (n / 32 fp16 bit patterns). Serial: callers split by blocks.
void ggml_quantize_blocks(GgmlBlockType t, const float* x, int64_t n, uint8_t* codes, uint16_t* scales);

// One row of activations into Q8_0 blocks, as ggml_quantize_blocks gives them bit for bit, and
// each block's sum of codes (sums[n / 32]): the products' x side (Note [Integer dot products at
// decode] in ggml_block_matvec.cc), vectorized on AVX-512 and AVX2 (Note [Q8_0 activations in
// vectors]). Serial.
void ggml_quantize_q8_0_row(const float* x, int64_t n, uint8_t* codes, uint16_t* scales, int32_t* sums);
// The paths of ggml_quantize_q8_0_row (the one above takes the best this CPU has).
enum class GgmlQuantizeIsa { kScalar, kAvx2, kAvx512 };
bool ggml_quantize_supports(GgmlQuantizeIsa isa);
void ggml_quantize_q8_0_row(GgmlQuantizeIsa isa, const float* x, int64_t n, uint8_t* codes, uint16_t* scales,
                            int32_t* sums);

// Elements [begin, end) of a weight stored as blocks back to back (row after row), dequantized
// into out[0, end - begin): q d in fp32 (exact: an 8-bit integer times an fp16 value), rounded
// once to T. Serial: callers split.
template <class T>
void ggml_dequantize(GgmlBlockType t, const uint8_t* codes, const uint16_t* scales, int64_t begin, int64_t end, T* out);

}  // namespace trident::kernels::cpu
