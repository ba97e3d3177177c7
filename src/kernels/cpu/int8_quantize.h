// Symmetric per-row int8 quantization: W8A8's activations (a scale per token, computed at run
// time) and its weights (a scale per output channel, computed once). Rows of a float matrix
// become int8 codes in [-127, 127] and one fp32 scale each:
//   scale[r] = absmax(x[r, :]) / 127,   q[r, k] = clamp(round_half_even(x[r, k] * (127 / absmax)), -127, 127)
// in fp32, in that order, on every path (so the AVX-512 and scalar paths give the same bits).
// -128 is never produced: the int8 GEMM's sign tricks need |q| <= 127 (Note [Int8 signs] in
// int8_gemm.cc). A row of zeros gets scale 0 and codes 0; a row holding a NaN or an infinity
// gets scale NaN and codes 0, so its products come out NaN instead of silently finite.
// Does not quantize to other widths or asymmetrically (no zero points: ONNX Runtime's dynamic
// quantization of activations is asymmetric u8; symmetric s8 keeps the GEMM's correction to one
// column sum per output channel).
#pragma once

#include <cstdint>

#include "kernels/cpu/int8_isa.h"

namespace trident::kernels::cpu {

// x (M, K) with row stride ldx -> q (M, K) with row stride ldq, scale (M). Serial: the
// caller's threads split rows (a decode step's activations are a few rows).
// isa kAuto picks the widest path this CPU runs; a path the CPU lacks throws (int8_isa.h).
void quantize_rows_int8(const float* x, int64_t M, int64_t K, int64_t ldx, int8_t* q, int64_t ldq, float* scale,
                        Int8Isa isa = Int8Isa::kAuto);

}  // namespace trident::kernels::cpu
