#include "core/kernel_switches.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/check.h"

namespace trident {
namespace {

constexpr std::array<KernelSwitchInfo, kNumKernelSwitches> kInfo = {{
    {"cpu_avx512", "TRIDENT_CPU_AVX512", true,
     "AdamW's AVX-512 path on CPUs with AVX-512F (other bits than the scalar path)"},
    {"cuda_tf32", "TRIDENT_CUDA_TF32", false,
     "TF32 tensor cores for fp32 GEMMs on a GPU (faster, 10-bit mantissas; as torch.backends.cuda.matmul.allow_tf32)"},
    {"cuda_cublaslt", "TRIDENT_CUDA_CUBLASLT", true,
     "GPU GEMMs through cuBLASLt with fused bias/GELU epilogues (false: cublasGemmEx and separate kernels)"},
    {"cuda_gelu_epilogue", "TRIDENT_CUDA_GELU_EPILOGUE", true,
     "the MLP's GELU in cuBLASLt's GEMM epilogue on a GPU (false: a separate kernel)"},
    {"attention_generic", "TRIDENT_ATTENTION_GENERIC", false,
     "the GPU's generic attention kernels everywhere, even where the tensor-core ones apply"},
    {"cpu_bf16_attention", "TRIDENT_CPU_BF16_ATTENTION", true,
     "bf16 attention multiplies bf16 tiles (vdpbf16ps) on CPUs with AVX512-BF16, as FlashAttention does on GPUs "
     "(false: f32 tiles; other bits)"},
}};

// -1: not decided yet (the environment or the default on first read); 0 or 1 after.
std::atomic<int> g_values[kNumKernelSwitches] = {-1, -1, -1, -1, -1, -1};
static_assert(kNumKernelSwitches == 6, "one -1 per switch above");

}  // namespace

const KernelSwitchInfo& kernel_switch_info(KernelSwitch s) { return kInfo[static_cast<size_t>(s)]; }

std::optional<bool> kernel_switch_from_env(KernelSwitch s) {
  const KernelSwitchInfo& info = kernel_switch_info(s);
  const char* env = std::getenv(info.env);
  if (env == nullptr || *env == '\0') return std::nullopt;  // unset, or set to nothing
  TRI_CHECK(std::strcmp(env, "0") == 0 || std::strcmp(env, "1") == 0, info.env, "=\"", env,
            "\" is not allowed: 0 or 1 (it overrides kernels.", info.key, ")");
  return env[0] == '1';
}

bool kernel_switch(KernelSwitch s) {
  std::atomic<int>& v = g_values[static_cast<size_t>(s)];
  int now = v.load(std::memory_order_relaxed);
  if (now >= 0) [[likely]]
    return now != 0;
  // First read without a config (a benchmark, a test): the environment, checked as a config's
  // resolution checks it, else the default.
  const bool on = kernel_switch_from_env(s).value_or(kernel_switch_info(s).default_value);
  int expected = -1;
  v.compare_exchange_strong(expected, on ? 1 : 0, std::memory_order_relaxed);
  return v.load(std::memory_order_relaxed) != 0;
}

void set_kernel_switch(KernelSwitch s, bool on) {
  g_values[static_cast<size_t>(s)].store(on ? 1 : 0, std::memory_order_relaxed);
}

}  // namespace trident
