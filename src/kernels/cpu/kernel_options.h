// The [kernels] section of a training config: which engine runs each dtype's GEMMs on the
// CPU (Note [GEMM engines] in gemm_engine.h), and the switches that pick other kernels or change
// numerics (core/kernel_switches.h: AVX-512 AdamW, TF32, cuBLASLt and its GELU epilogue, the
// generic attention kernels). Config files and the CLI write "auto", or an engine; the resolved
// config names the engine, so that it runs the same way again. Each switch's environment
// variable overrides the config, and the resolved config shows the value the run used.
#pragma once

#include <string>

#include "core/kernel_switches.h"
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
  // The switches, as core/kernel_switches.h (defaults there).
  bool cpu_avx512 = true;
  bool cuda_tf32 = false;
  bool cuda_cublaslt = true;
  bool cuda_gelu_epilogue = true;
  bool attention_generic = false;
  bool cpu_bf16_attention = true;
  bool& value_of(KernelSwitch s);
  bool value_of(KernelSwitch s) const { return const_cast<KernelsOptions*>(this)->value_of(s); }

  // `uses_bf16`: whether the run multiplies bf16 matrices (precision bf16). When it does not,
  // bf16_gemm is neither checked nor resolved (bf16 GEMMs, should any run, are widened): an
  // fp32 run's printed config must also run on a CPU without native bf16, and a bad
  // TRIDENT_CPU_BF16_GEMM must not stop it.
  // The engines these settings select on this CPU. Throws, naming the key, for onednn bf16
  // on a CPU without native bf16 (with its ISA), or for a bad environment value under auto.
  GemmEngines engines(bool uses_bf16 = true) const;
  // The same settings with each "auto" replaced by the engine it picks here, and each switch
  // whose variable is set in the environment given its value (throws naming a variable set to
  // anything but 0 or 1).
  KernelsOptions resolved(bool uses_bf16 = true) const;
  // What the environment overrides: "TRIDENT_CUDA_TF32=1 sets kernels.cuda_tf32 = true; ...",
  // or "" (for the run to print).
  static std::string environment_overrides();
  // Checks that the settings run on this CPU (engines() without the result).
  void validate(bool uses_bf16 = true) const { (void)engines(uses_bf16); }
  // Makes these the process's engines (set_gemm_engines) and switches (set_kernel_switch),
  // before the run's first kernel.
  void apply(bool uses_bf16 = true) const;

  static const OptionTable<KernelsOptions>& table();
};

}  // namespace trident::kernels::cpu
