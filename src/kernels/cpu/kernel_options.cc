#include "kernels/cpu/kernel_options.h"

namespace trident::kernels::cpu {

const OptionTable<KernelsOptions>& KernelsOptions::table() {
  static const auto t =
      OptionTable<KernelsOptions>("kernels", "CPU kernels: the GEMM engine per dtype (Note [GEMM engines])")
          .add("f32_gemm", &KernelsOptions::f32_gemm,
               "f32 GEMMs: auto (oneDNN on AVX-512 CPUs, else OpenBLAS; the resolved config names the engine), "
               "onednn or openblas",
               {"auto", "onednn", "openblas"})
          .add("bf16_gemm", &KernelsOptions::bf16_gemm,
               "bf16 GEMMs: auto (oneDNN where the CPU has native bf16, else widen), onednn, or widen (operands "
               "widened to f32 on the f32 engine)",
               {"auto", "onednn", "widen"});
  return t;
}

GemmEngines KernelsOptions::engines(bool uses_bf16) const {
  return {gemm_engine_from(GemmType::kF32, f32_gemm, "kernels.f32_gemm"),
          uses_bf16 ? gemm_engine_from(GemmType::kBF16, bf16_gemm, "kernels.bf16_gemm") : GemmEngine::kOpenBlas};
}

KernelsOptions KernelsOptions::resolved(bool uses_bf16) const {
  const GemmEngines e = engines(uses_bf16);
  KernelsOptions r = *this;
  r.f32_gemm = gemm_engine_value(GemmType::kF32, e.f32);
  if (uses_bf16) r.bf16_gemm = gemm_engine_value(GemmType::kBF16, e.bf16);
  return r;
}

}  // namespace trident::kernels::cpu
