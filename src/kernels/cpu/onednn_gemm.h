// GEMM blocks through oneDNN's matmul primitive: f32 on AVX-512 CPUs, where its brgemm kernels
// beat OpenBLAS, and bf16 on CPUs with native bf16 dot products (AVX512_BF16, AMX), about
// twice the f32 rate. Which engine a dtype uses is gemm_engine.h's choice.
#pragma once

#include <cstdint>
#include <string>

namespace trident::kernels::cpu {

// Whether oneDNN runs bf16 matmuls natively on this CPU, whether it runs AVX-512 kernels, and
// its name for the CPU's ISA.
bool onednn_has_native_bf16();
bool onednn_has_avx512();
std::string onednn_cpu_isa();

// C (M,N) = alpha * op(A) @ op(B) + beta * C on the calling thread only, with fp32
// accumulation; the layout conventions are those of gemm in matmul.h. In is float or bf16;
// Out is float or (for bf16 In) bf16, rounded once. Throws, naming the shape and the CPU's
// ISA, where oneDNN has no implementation (bf16 on a CPU without native bf16).
template <class In, class Out>
void onednn_gemm_serial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const In* A,
                        int64_t lda, const In* B, int64_t ldb, float beta, Out* C, int64_t ldc);

// The bytes of oneDNN's scratchpad that onednn_gemm_serial takes from the host allocator (as
// activations) while it computes this product: a bf16 C with a row stride wider than N gets
// an f32 copy of the whole product there (Note [oneDNN's scratchpad] in onednn_gemm.cc).
template <class In, class Out>
int64_t onednn_gemm_serial_scratchpad_bytes(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, int64_t lda,
                                            int64_t ldb, int64_t ldc, float alpha, float beta);

// The same product on oneDNN's own OpenMP threads (all of the process's), as a library user
// would call it: the reference ceiling that gemm_rates.h measures beside trident's blocks.
// Its bits depend on the thread count, so nothing but measurements calls it. Not inside a
// parallel region. In/Out: float/float or bf16/bf16.
template <class In, class Out>
void onednn_gemm_threaded(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const In* A,
                          int64_t lda, const In* B, int64_t ldb, float beta, Out* C, int64_t ldc);

}  // namespace trident::kernels::cpu
