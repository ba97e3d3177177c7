// W8A8's matrix product through oneDNN's int8 matmul (AMX-int8 tiles or AVX-512 VNNI, its
// choice), the alternative to int8_gemm.h's own kernels for the products where it is faster
// (Note [Int8 GEMM engines] in quantization/w8a8_weight.h). The same contract and the same bits as int8_gemm:
//   C (M, N) = float(sum_k A[m, k] W[n, k]) * (a_scale[m] * w_scale[n])  [+ bias[n]]
// oneDNN sums in int32 and writes float(sum); the scales and bias are applied afterwards by
// int8_gemm.h's epilogue (oneDNN 2.6 takes per-channel scales only as fixed primitive
// attributes or through its slow reference kernels, and no per-row scales).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cpu/int8_gemm.h"

namespace trident::kernels::cpu {

// An (N, K) int8 weight reordered once into the blocked layout oneDNN's matmul picks on this
// CPU, with its per-channel scales. Immutable once built; any thread may use it.
class OnednnInt8Weights {
 public:
  // W (N, K) int8 with row stride ldw, scale (N). Throws naming the shape where oneDNN has no
  // int8 matmul on this CPU.
  OnednnInt8Weights(const int8_t* W, int64_t N, int64_t K, int64_t ldw, const float* scale);
  ~OnednnInt8Weights();
  OnednnInt8Weights(OnednnInt8Weights&&) noexcept;
  OnednnInt8Weights& operator=(OnednnInt8Weights&&) noexcept;

  int64_t N() const { return N_; }
  int64_t K() const { return K_; }
  const float* scales() const { return scales_.data(); }
  // Bytes of the reordered weight (with oneDNN's compensation, where its kernels need one).
  int64_t nbytes() const;

  struct Impl;  // oneDNN's memory and descriptor (onednn_int8_gemm.cc)
  const Impl& impl() const { return *impl_; }

 private:
  int64_t N_, K_;
  std::vector<float> scales_;
  std::unique_ptr<Impl> impl_;
};

// C (M, N), row stride ldc, = A (M, K) int8 (row stride lda) times w^T, scaled, plus bias
// (N) when not null: on oneDNN's OpenMP threads (all of the process's); the bits depend on
// nothing but the operands. Not inside a parallel region. C is written (`=`).
void onednn_int8_gemm(int64_t M, const int8_t* A, int64_t lda, const float* a_scale, const OnednnInt8Weights& w,
                      const float* bias, float* C, int64_t ldc);

}  // namespace trident::kernels::cpu
