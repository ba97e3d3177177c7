// Products with a few rows: C (M,N) = alpha * A (M,K) @ op(B) (K,N) + beta * C for M up to
// kGemvMaxRows, which is what a decode step is (one new token per running request). Such a
// product reads each weight once and does two flops per weight read, so its speed is the memory
// bandwidth's: a GEMM library's blocking and packing (built for reuse of B across many rows)
// only costs here. These kernels stream B's rows once, in order, each thread its own columns.
//
// Note [Row-independent small products]
// Each output is one dot product summed in a fixed order: 16 lanes over k ascending, then the
// lanes in a fixed tree (op(B) = B^T), or k ascending one term at a time (op(B) = B). So a row's
// result does not depend on M, on the other rows, on which columns a thread takes, or on the
// thread count: a request decoded in a batch of 8 gets the bits it gets alone.
#pragma once

#include <cstdint>

namespace trident::kernels::cpu {

inline constexpr int64_t kGemvMaxRows = 8;

// Whether gemm (matmul.h) takes this path: A not transposed, 1 <= M <= kGemvMaxRows, K >= 1.
inline bool gemv_applies(bool trans_a, int64_t M, int64_t K) { return !trans_a && M >= 1 && M <= kGemvMaxRows && K >= 1; }

// T is float or bf16 (accumulated in f32, C rounded once). `serial`: on the calling thread only.
template <class T>
void gemv(bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const T* A, int64_t lda, const T* B,
          int64_t ldb, float beta, T* C, int64_t ldc, bool serial);

}  // namespace trident::kernels::cpu
