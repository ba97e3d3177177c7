// Which library multiplies the matrices of a dtype on this CPU: OpenBLAS or oneDNN's matmul.
// Both run inside the fixed blocks of Note [Deterministic GEMM] (matmul.cc), one block per
// thread, so either gives the same bits with any thread count; the two engines give
// different bits from each other, so results are reproducible per CPU type and engine, not
// across them. The choice is a config section, [kernels] (kernel_options.h).
//
// Note [GEMM engines]
// Q: Which engine does a dtype use?
// A: The process's engine for it: set_gemm_engine (the trainer sets it from the config's
//    [kernels] before its first GEMM), else auto's choice, made on the first GEMM. auto picks
//    by the CPU's instruction set, as oneDNN reports it:
//   f32:  oneDNN where it runs AVX-512 (brgemm kernels), else OpenBLAS. Measured on 2 cores
//         at GPT-2 124M's shapes, trident's blocked GEMM: Zen 4 (AVX-512 on 256-bit units)
//         oneDNN 200-215 GFLOP/s, OpenBLAS 170-190 (bench/matmul_bench); Zen 5 (512-bit
//         units, issue #20) oneDNN's f32 matmul 348, OpenBLAS 179 (it runs its Haswell
//         kernel there). On AVX2-only CPUs OpenBLAS stays, unmeasured against oneDNN.
//   bf16: oneDNN where the CPU has native bf16 dot products (AVX512_BF16, AMX), about twice
//         the f32 rate; elsewhere the operands are widened to f32 for the f32 engine (oneDNN
//         2.6 has no bf16 matmul without them). f16 is always widened so.
//   `trident gemm-rates` (gemm_rates.h) measures every engine at a model's shapes, so a CPU
//   where the rule picks the slower one shows it; the config then names the other. At GPT-2
//   124M's step shapes on 2 Zen 5 cores it gave (noisy, a shared machine) onednn-f32 416
//   GFLOP/s, openblas-f32 211, onednn-bf16 904, widened-f32 414.
// The environment variables TRIDENT_CPU_F32_GEMM=auto|onednn|openblas and
// TRIDENT_CPU_BF16_GEMM=auto|onednn|widen, when set, are what auto means (the tests run the
// op suite on each engine through them). f64 (the tests' reference) is always OpenBLAS.
//
// Q: Why by instruction set, not by timing the engines at start and taking the faster?
// A: The engines round differently. A timing probe on a shared or throttled machine can come
//    out either way, so two runs of one config on one machine could pick different engines
//    and give different bits: a resumed run would continue on other numbers than the run it
//    resumes, and a run would not reproduce itself. The ISA is the same every time on a CPU
//    type. And a run's engine is never implicit: the resolved config (what `trident train`
//    prints and checkpoints store) names the engine auto picked, not "auto", so the printed
//    config runs on the same engine wherever it is given (bf16 only in bf16 runs, where it
//    matters: KernelsOptions in kernel_options.h).
#pragma once

#include <cstdint>
#include <string>

namespace trident::kernels::cpu {

enum class GemmType : uint8_t { kF32, kBF16 };
// kOpenBlas for bf16: the operands widened to f32, multiplied on the f32 engine.
enum class GemmEngine : uint8_t { kOpenBlas, kOneDnn };

// The engines of both types, as one value (a widened bf16 GEMM runs on `f32`).
struct GemmEngines {
  GemmEngine f32 = GemmEngine::kOpenBlas;
  GemmEngine bf16 = GemmEngine::kOpenBlas;
  GemmEngine of(GemmType type) const { return type == GemmType::kF32 ? f32 : bf16; }
  bool operator==(const GemmEngines&) const = default;
};

// The engine this process uses for `type`: the last set_gemm_engine, else auto's choice
// (made on the first call; throws, naming the variable, for a bad environment value).
// Thread-safe.
GemmEngine gemm_engine(GemmType type);
GemmEngines gemm_engines();
// Sets the process's engine for `type`. Thread-safe; a GEMM already running finishes on the
// engine it started with, later ones use this. Throws, naming the CPU's ISA, for onednn bf16
// on a CPU without native bf16.
void set_gemm_engine(GemmType type, GemmEngine engine);
void set_gemm_engines(const GemmEngines& engines);

// The engine auto picks by the CPU's instruction set alone (Note [GEMM engines]).
GemmEngine gemm_engine_by_isa(GemmType type);
// The engine a setting's value selects on this CPU: "auto" (the environment variable if set,
// else by ISA), "onednn", "openblas" (f32) or "widen" (bf16). `setting` names it in errors:
// a config key ("kernels.bf16_gemm") or an environment variable (the default). Throws,
// naming the setting, the value and what is allowed, for an unknown value, and, naming the
// CPU's ISA, for onednn bf16 where oneDNN cannot run it.
GemmEngine gemm_engine_from(GemmType type, const std::string& value, const std::string& setting = "");
// The environment variable of a type: "TRIDENT_CPU_F32_GEMM", "TRIDENT_CPU_BF16_GEMM".
const char* gemm_engine_variable(GemmType type);

// "f32", "bf16".
const char* gemm_type_name(GemmType type);
// "onednn-f32", "openblas-f32", "onednn-bf16", "widened-f32".
const char* gemm_engine_name(GemmType type, GemmEngine engine);
// The setting's value that selects it: "onednn", "openblas" (f32), "widen" (bf16).
const char* gemm_engine_value(GemmType type, GemmEngine engine);

}  // namespace trident::kernels::cpu
