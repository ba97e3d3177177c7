#include "kernels/cpu/gemm_engine.h"

#include <cstdlib>

#include "core/check.h"
#include "kernels/cpu/onednn_gemm.h"

namespace trident::kernels::cpu {

GemmEngine gemm_engine_from(GemmType type, const std::string& value) {
  if (type == GemmType::kF32) {
    if (value == "auto") return onednn_has_avx512() ? GemmEngine::kOneDnn : GemmEngine::kOpenBlas;
    if (value == "openblas") return GemmEngine::kOpenBlas;
    TRI_CHECK(value == "onednn", "TRIDENT_CPU_F32_GEMM=", value, ": allowed values are auto, onednn, openblas");
    return GemmEngine::kOneDnn;  // oneDNN has an f32 matmul for every x86-64 CPU
  }
  if (value == "auto") return onednn_has_native_bf16() ? GemmEngine::kOneDnn : GemmEngine::kOpenBlas;
  if (value == "widen") return GemmEngine::kOpenBlas;
  TRI_CHECK(value == "onednn", "TRIDENT_CPU_BF16_GEMM=", value, ": allowed values are auto, onednn, widen");
  TRI_CHECK(onednn_has_native_bf16(), "TRIDENT_CPU_BF16_GEMM=onednn: oneDNN runs bf16 matmuls natively only on CPUs ",
            "with AVX512_BF16 or AMX, and this CPU's ISA is ", onednn_cpu_isa(), " (use auto or widen)");
  return GemmEngine::kOneDnn;
}

namespace {
GemmEngine from_env(GemmType type, const char* variable) {
  const char* env = std::getenv(variable);
  return gemm_engine_from(type, env != nullptr ? env : "auto");
}
}  // namespace

GemmEngine gemm_engine(GemmType type) {
  // One static per type: a bad bf16 value must not break f32 GEMMs.
  if (type == GemmType::kF32) {
    static const GemmEngine f32 = from_env(GemmType::kF32, "TRIDENT_CPU_F32_GEMM");
    return f32;
  }
  static const GemmEngine bf16 = from_env(GemmType::kBF16, "TRIDENT_CPU_BF16_GEMM");
  return bf16;
}

const char* gemm_engine_name(GemmType type, GemmEngine engine) {
  if (type == GemmType::kF32) return engine == GemmEngine::kOneDnn ? "onednn-f32" : "openblas-f32";
  return engine == GemmEngine::kOneDnn ? "onednn-bf16" : "widened-f32";  // then on the f32 engine
}

}  // namespace trident::kernels::cpu
