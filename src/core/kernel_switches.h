// Process-wide switches that pick a kernel or change numerics. Each is a key of the [kernels]
// config section (kernels/cpu/kernel_options.h: the run's config sets them) and has an
// environment variable that overrides the config, for benchmarks and bisecting ("0" or "1";
// a training run prints the override and its resolved config shows the value it ran with).
// Backends read them with one relaxed atomic load.
#pragma once

#include <optional>
#include <string>

namespace trident {

enum class KernelSwitch : int {
  kCpuAvx512,         // AdamW's AVX-512 path on CPUs with AVX-512F (TRIDENT_CPU_AVX512)
  kCudaTf32,          // TF32 tensor cores for fp32 GEMMs on a GPU (TRIDENT_CUDA_TF32)
  kCudaCublasLt,      // GPU GEMMs through cuBLASLt with fused epilogues, else cublasGemmEx (TRIDENT_CUDA_CUBLASLT)
  kCudaGeluEpilogue,  // the MLP's GELU in cuBLASLt's GEMM epilogue (TRIDENT_CUDA_GELU_EPILOGUE)
  kAttentionGeneric,  // the GPU's generic (SIMT) attention kernels even where tensor cores apply (TRIDENT_ATTENTION_GENERIC)
  kCpuBf16Attention,  // bf16 attention's tile products by vdpbf16ps on CPUs with AVX512-BF16 (TRIDENT_CPU_BF16_ATTENTION)
};
inline constexpr int kNumKernelSwitches = 6;

struct KernelSwitchInfo {
  const char* key;       // in [kernels]
  const char* env;       // the overriding variable
  bool default_value;
  const char* doc;
};
const KernelSwitchInfo& kernel_switch_info(KernelSwitch s);

// The switch's value: the last set_kernel_switch, else the environment's ("0" or "1"; any
// other value is an error naming the variable), else its default.
bool kernel_switch(KernelSwitch s);
void set_kernel_switch(KernelSwitch s, bool on);
// The environment's value: nullopt when the variable is unset or empty; throws naming the
// variable when it is set to anything but "0" or "1".
std::optional<bool> kernel_switch_from_env(KernelSwitch s);

}  // namespace trident
