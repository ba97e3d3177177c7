// W8A8's matrix product: int8 activations (a scale per row, int8_quantize.h) times int8
// weights (a scale per output channel), summed exactly in int32, scaled once in fp32:
//   C (M, N) = float(sum_k A[m, k] W[n, k]) * (a_scale[m] * w_scale[n])  [+ bias[n], fused]
// The weights are packed once (at load) into the layout the dot-product instructions read
// (Note [Int8 packed weights] in int8_gemm.cc); the activations are quantized per call.
// Paths: AVX-512 VNNI, AVX-VNNI, AVX2 and scalar, chosen at run time (int8_isa.h); every path
// gives the same bits. Codes must lie in [-127, 127] (Note [Int8 signs]).
// Does not quantize, train, or run on a device: the weights are frozen host memory.
#pragma once

#include <cstdint>

#include "core/allocator.h"
#include "kernels/cpu/int8_isa.h"

namespace trident::kernels::cpu {

// The longest rows int32 sums hold: K x 255 x 127 < 2^31 (Note [Int8 signs] in int8_gemm.cc).
inline constexpr int64_t kInt8GemmMaxK = (int64_t{1} << 31) / (255 * 127) - 1;

// An (N, K) int8 weight in the packed layout, its per-channel scales and the column sums the
// unsigned-by-signed instructions correct by. Owns its memory (parameter memory of the host
// allocator); immutable once built, so any number of threads may read it.
class Int8PackedWeights {
 public:
  // W (N, K) int8 with row stride ldw (codes in [-127, 127]), scale (N). Throws naming the
  // first code of -128 (row, column), or a K past kInt8GemmMaxK.
  Int8PackedWeights(const int8_t* W, int64_t N, int64_t K, int64_t ldw, const float* scale);

  int64_t N() const { return N_; }
  int64_t K() const { return K_; }
  // Blocks of 16 output channels and groups of 4 inputs (the padded extents / 16 and / 4).
  int64_t n_blocks() const { return (N_ + 15) / 16; }
  int64_t k_groups() const { return (K_ + 3) / 4; }
  // [n_blocks][k_groups][16 channels][4 inputs]; zeros past N and K.
  const int8_t* data() const { return static_cast<const int8_t*>(data_.get()); }
  // 128 x sum_k W[n, k] per channel (n_blocks x 16, zeros past N).
  const int32_t* compensation() const { return static_cast<const int32_t*>(compensation_.get()); }
  // w_scale per channel (n_blocks x 16, zeros past N).
  const float* scales() const { return static_cast<const float*>(scales_.get()); }
  // W[n, k], read back from the packed layout.
  int8_t at(int64_t n, int64_t k) const;
  // Row n's K codes into out.
  void row(int64_t n, int8_t* out) const;
  // Bytes held (packed codes, compensation and scales).
  int64_t nbytes() const;

 private:
  int64_t N_, K_;
  DataPtr data_, compensation_, scales_;
};

// C (M, N) with row stride ldc = A (M, K) int8 (row stride lda, codes in [-127, 127]) times
// w^T, scaled by a_scale (M) and w.scales(), plus bias (N) when not null. Uses every thread
// for products big enough to share; the bits do not depend on the thread count. Throws naming
// the ISA when the CPU lacks it. C is written (`=`), never accumulated into.
void int8_gemm(int64_t M, const int8_t* A, int64_t lda, const float* a_scale, const Int8PackedWeights& w,
               const float* bias, float* C, int64_t ldc, Int8Isa isa = Int8Isa::kAuto);

// The epilogue every path applies, for a C that already holds float(sum) (oneDNN's result):
// in place, C[m, n] = C[m, n] * (a_scale[m] * w_scale[n]) [+ bias[n], fused]. Uses every
// thread for big products.
void int8_gemm_epilogue(int64_t M, int64_t N, const float* a_scale, const float* w_scale, const float* bias, float* C,
                        int64_t ldc);

}  // namespace trident::kernels::cpu
