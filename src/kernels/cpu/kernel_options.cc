#include "kernels/cpu/kernel_options.h"

#include "core/check.h"

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
               {"auto", "onednn", "widen"})
          .add("cpu_avx512", &KernelsOptions::cpu_avx512, kernel_switch_info(KernelSwitch::kCpuAvx512).doc)
          .add("cuda_tf32", &KernelsOptions::cuda_tf32, kernel_switch_info(KernelSwitch::kCudaTf32).doc)
          .add("cuda_cublaslt", &KernelsOptions::cuda_cublaslt, kernel_switch_info(KernelSwitch::kCudaCublasLt).doc)
          .add("cuda_gelu_epilogue", &KernelsOptions::cuda_gelu_epilogue,
               kernel_switch_info(KernelSwitch::kCudaGeluEpilogue).doc)
          .add("attention_generic", &KernelsOptions::attention_generic,
               kernel_switch_info(KernelSwitch::kAttentionGeneric).doc)
          .add("cpu_bf16_attention", &KernelsOptions::cpu_bf16_attention,
               kernel_switch_info(KernelSwitch::kCpuBf16Attention).doc);
  return t;
}

bool& KernelsOptions::value_of(KernelSwitch s) {
  switch (s) {
    case KernelSwitch::kCpuAvx512: return cpu_avx512;
    case KernelSwitch::kCudaTf32: return cuda_tf32;
    case KernelSwitch::kCudaCublasLt: return cuda_cublaslt;
    case KernelSwitch::kCudaGeluEpilogue: return cuda_gelu_epilogue;
    case KernelSwitch::kAttentionGeneric: return attention_generic;
    case KernelSwitch::kCpuBf16Attention: return cpu_bf16_attention;
  }
  TRI_CHECK(false, "KernelsOptions: unknown switch ", static_cast<int>(s));
}

std::string KernelsOptions::environment_overrides() {
  std::string out;
  for (int i = 0; i < kNumKernelSwitches; ++i) {
    const auto s = static_cast<KernelSwitch>(i);
    if (const std::optional<bool> v = kernel_switch_from_env(s))
      out += std::string(out.empty() ? "" : "; ") + kernel_switch_info(s).env + "=" + (*v ? "1" : "0") +
             " sets kernels." + kernel_switch_info(s).key + " = " + (*v ? "true" : "false");
  }
  return out;
}

void KernelsOptions::apply(bool uses_bf16) const {
  set_gemm_engines(engines(uses_bf16));
  for (int i = 0; i < kNumKernelSwitches; ++i) set_kernel_switch(static_cast<KernelSwitch>(i), value_of(static_cast<KernelSwitch>(i)));
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
  for (int i = 0; i < kNumKernelSwitches; ++i)
    if (const std::optional<bool> v = kernel_switch_from_env(static_cast<KernelSwitch>(i)))
      r.value_of(static_cast<KernelSwitch>(i)) = *v;
  return r;
}

}  // namespace trident::kernels::cpu
