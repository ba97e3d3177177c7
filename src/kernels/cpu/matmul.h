// General matrix multiply on row-major matrices, through OpenBLAS or oneDNN (gemm_engine.h):
//   C (M,N) = alpha * op(A) (M,K) @ op(B) (K,N) + beta * C
// op(X) is X or X^T (trans_*), so transposed operands need no copy. lda/ldb/ldc are row
// strides in elements (of the matrices as stored). Accumulation semantics: `=` when beta
// is 0, `+=` (scaled) otherwise.
//   f32: oneDNN's f32 matmul on AVX-512 CPUs, else sgemm.  f64: dgemm.  f16: operands widened
//   to f32, sgemm, C rounded once (fp32 accumulation).  bf16: oneDNN's native bf16 matmul
//   where the CPU has AVX512_BF16 or AMX, else widened like f16 (gemm_engine() says which).
#pragma once

#include <cstdint>

#include "kernels/cpu/gemm_engine.h"

namespace trident::kernels::cpu {

// Uses every thread; results are bitwise independent of the thread count
// (Note [Deterministic GEMM] in matmul.cc). A product of at most kGemvMaxRows rows (a decode
// step) runs on gemv.h's bandwidth-bound kernels, whose rows do not depend on each other.
template <class T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const T* A,
          int64_t lda, const T* B, int64_t ldb, float beta, T* C, int64_t ldc);

// The same product on the given engines instead of the process's: to time or compare the
// engines in one process (gemm_rates.h, tests). The same bits as gemm with those engines set,
// but for few rows: those stay on the engines (gemm takes gemv.h's kernels).
// `block`: rows (or columns) per block instead of the shape's own (0), so that a part of a
// long product can be timed in the whole product's blocks (Note [Bounded measurement]).
template <class T>
void gemm_on(const GemmEngines& engines, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
             const T* A, int64_t lda, const T* B, int64_t ldb, float beta, T* C, int64_t ldc, int64_t block = 0);

// The same product on the calling thread only: for kernels that already run in parallel
// over independent matrices. Gives the same bits as gemm for matrices of one block.
template <class T>
void gemm_serial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                 const T* A, int64_t lda, const T* B, int64_t ldb, float beta, T* C, int64_t ldc);

// The same product with a float result for bf16/f16 (or f32) operands: C stays fp32, so a
// sum over several calls (beta = 1) is accumulated in fp32, not rounded to T each time.
template <class T>
void gemm_to_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const T* A,
                 int64_t lda, const T* B, int64_t ldb, float beta, float* C, int64_t ldc);

// The most host memory of the engine's own that gemm_on(engines, ...) (the shape's own blocks,
// alpha 1) holds at once for this product on `threads` threads: oneDNN's scratchpad of each
// block in flight (Note [oneDNN's scratchpad] in onednn_gemm.cc), for the planner's memory
// model. T is float or bf16; a widened bf16 product's f32 copies are not counted here.
template <class T>
int64_t gemm_engine_scratch_bytes(const GemmEngines& engines, int threads, bool trans_a, bool trans_b, int64_t M,
                                  int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc, float beta = 0.0f);

// Rows (or columns) per block of the deterministic GEMM (half as many, rounded to 16, where an
// extent is 3, 5 or 7 of them: Note [Even block counts] in matmul.cc).
inline constexpr int64_t kGemmBlock = 256;

// The rows (or columns) per block that a product split along `extent` gets: kGemmBlock, or
// less (Note [Even block counts]), or more for an extent over 16 blocks (Note [Long extents]).
int64_t gemm_block_extent(int64_t extent);

}  // namespace trident::kernels::cpu
