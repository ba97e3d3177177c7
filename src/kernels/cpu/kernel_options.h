// The [kernels] section of a training config: which engine runs each dtype's GEMMs on the
// CPU (Note [GEMM engines] in gemm_engine.h). Config files and the CLI write "auto", or an
// engine; the resolved config names the engine, so that it runs the same way again.
#pragma once

#include <string>

#include "core/options.h"
#include "kernels/cpu/gemm_engine.h"

namespace trident::kernels::cpu {

struct KernelsOptions {
  // f32 GEMMs: "auto" (oneDNN on AVX-512 CPUs, else OpenBLAS; TRIDENT_CPU_F32_GEMM if set),
  // "onednn" or "openblas".
  std::string f32_gemm = "auto";
  // bf16 GEMMs: "auto" (oneDNN where the CPU has native bf16, else widen;
  // TRIDENT_CPU_BF16_GEMM if set), "onednn" or "widen" (operands widened to f32, on the f32
  // engine).
  std::string bf16_gemm = "auto";

  // `uses_bf16`: whether the run multiplies bf16 matrices (precision bf16). When it does not,
  // bf16_gemm is neither checked nor resolved (bf16 GEMMs, should any run, are widened): an
  // fp32 run's printed config must also run on a CPU without native bf16, and a bad
  // TRIDENT_CPU_BF16_GEMM must not stop it.
  // The engines these settings select on this CPU. Throws, naming the key, for onednn bf16
  // on a CPU without native bf16 (with its ISA), or for a bad environment value under auto.
  GemmEngines engines(bool uses_bf16 = true) const;
  // The same settings with each "auto" replaced by the engine it picks here.
  KernelsOptions resolved(bool uses_bf16 = true) const;
  // Checks that the settings run on this CPU (engines() without the result).
  void validate(bool uses_bf16 = true) const { (void)engines(uses_bf16); }
  // Makes these the process's engines (set_gemm_engines), before the run's first GEMM.
  void apply(bool uses_bf16 = true) const { set_gemm_engines(engines(uses_bf16)); }

  static const OptionTable<KernelsOptions>& table();
};

}  // namespace trident::kernels::cpu
