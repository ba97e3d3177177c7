// Which library multiplies the matrices of a dtype on this CPU: OpenBLAS or oneDNN's matmul.
// Both run inside the fixed blocks of Note [Deterministic GEMM] (matmul.cc), one block per
// thread, so either gives the same bits with any thread count; the two engines give
// different bits from each other, so results are reproducible per CPU type, not across them.
//
// Note [GEMM engines]
// auto picks, per dtype, the engine that is fastest on the CPU's instruction set:
//   f32:  oneDNN where it runs AVX-512 (brgemm kernels), else OpenBLAS. Measured on 2 cores
//         at GPT-2 124M's shapes, trident's blocked GEMM: Zen 4 (AVX-512 on 256-bit units)
//         oneDNN 200-215 GFLOP/s, OpenBLAS 170-190 (bench/matmul_bench); Zen 5 (512-bit
//         units, issue #20) oneDNN's f32 matmul 348, OpenBLAS 179 (it runs its Haswell
//         kernel there). On AVX2-only CPUs OpenBLAS stays, unmeasured against oneDNN.
//   bf16: oneDNN where the CPU has native bf16 dot products (AVX512_BF16, AMX), about twice
//         the f32 rate; elsewhere the operands are widened to f32 for the f32 engine (oneDNN
//         2.6 has no bf16 matmul without them). f16 is always widened so.
// Environment overrides, read once per process: TRIDENT_CPU_F32_GEMM=auto|onednn|openblas,
// TRIDENT_CPU_BF16_GEMM=auto|onednn|widen. f64 (the tests' reference) is always OpenBLAS.
#pragma once

#include <cstdint>
#include <string>

namespace trident::kernels::cpu {

enum class GemmType : uint8_t { kF32, kBF16 };
// kOpenBlas for bf16: the operands widened to f32, multiplied on the f32 engine.
enum class GemmEngine : uint8_t { kOpenBlas, kOneDnn };

// The engine this process uses for `type` (its environment variable, else auto).
GemmEngine gemm_engine(GemmType type);
// The engine a variable's value selects on this CPU; throws, naming the variable, the value
// and what is allowed, for an unknown value or for onednn where oneDNN cannot run it.
GemmEngine gemm_engine_from(GemmType type, const std::string& value);
// "onednn-f32", "openblas-f32", "onednn-bf16", "widened-f32".
const char* gemm_engine_name(GemmType type, GemmEngine engine);

}  // namespace trident::kernels::cpu
