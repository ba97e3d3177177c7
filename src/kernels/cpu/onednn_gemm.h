// GEMM blocks through oneDNN's matmul primitive: how bf16 GEMMs use the CPU's native bf16
// dot products (AVX512_BF16, AMX), about twice the fp32 rate where the CPU has them. oneDNN
// (2.6, Debian 12) has no bf16 matmul on CPUs without them; there matmul.cc widens bf16 to
// f32 for OpenBLAS instead. The f32 instantiation exists so the wrapper (strides, transposes,
// alpha, beta) is tested on every machine.
//
// Which engine bf16 GEMMs use is chosen once per process: TRIDENT_CPU_BF16_GEMM=auto
// (default: oneDNN where the CPU has native bf16), onednn (an error where it has not), or
// widen (f32 OpenBLAS always).
#pragma once

#include <cstdint>
#include <string>

namespace trident::kernels::cpu {

enum class Bf16GemmEngine : uint8_t { kWidenedSgemm, kOneDnn };

// The engine bf16 GEMMs use in this process (TRIDENT_CPU_BF16_GEMM, read once).
Bf16GemmEngine bf16_gemm_engine();
// The engine a TRIDENT_CPU_BF16_GEMM value selects on this CPU; throws, naming the value and
// what is allowed, for an unknown value or for onednn on a CPU without native bf16.
Bf16GemmEngine bf16_gemm_engine_from(const std::string& value);
const char* bf16_gemm_engine_name(Bf16GemmEngine engine);

// Whether oneDNN runs bf16 matmuls natively on this CPU, and its name for the CPU's ISA.
bool onednn_has_native_bf16();
std::string onednn_cpu_isa();

// C (M,N) = alpha * op(A) @ op(B) + beta * C on the calling thread only, with fp32
// accumulation; the layout conventions are those of gemm in matmul.h. In is float or bf16;
// Out is float or (for bf16 In) bf16, rounded once. Throws, naming the shape and the CPU's
// ISA, where oneDNN has no implementation (bf16 on a CPU without native bf16).
template <class In, class Out>
void onednn_gemm_serial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const In* A,
                        int64_t lda, const In* B, int64_t ldb, float beta, Out* C, int64_t ldc);

}  // namespace trident::kernels::cpu
