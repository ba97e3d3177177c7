// What the hand-vectorized GGML kernels (ggml_block_matvec.cc, ggml_block_gemm.cc,
// ggml_blocks.cc) put around their x86 intrinsics: per-function target attributes (the build
// itself keeps VNNI off: Note [GCC's int8 dot products] in cmake/Warnings.cmake) and the one
// GCC 12 warning to silence there: avx512fintrin.h seeds conversions with _mm512_undefined_*(),
// which -Wmaybe-uninitialized reports once inlined (a false positive, as in adamw.cc).
#pragma once

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#define TRI_X86_INTRINSICS_BEGIN                                  \
  _Pragma("GCC diagnostic push")                                  \
  _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")     \
  _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")
#define TRI_X86_INTRINSICS_END _Pragma("GCC diagnostic pop")

// The integer dot-product kernels: AVX-512 with VNNI, or AVX2.
#define TRI_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")))
#define TRI_AVX2 __attribute__((target("avx2,fma,f16c")))

#if defined(__x86_64__)
namespace trident::kernels::cpu {
// F16C from CPUID leaf 1 (ECX bit 29): clang 14, the fuzz build's compiler, does not accept
// "f16c" in __builtin_cpu_supports.
inline bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}
}  // namespace trident::kernels::cpu
#endif
