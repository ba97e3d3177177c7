// What the hand-vectorized GGML kernels (ggml_block_matvec.cc, ggml_block_gemm.cc,
// ggml_blocks.cc) put around their x86 intrinsics: per-function target attributes (the build
// itself keeps VNNI off: Note [GCC's int8 dot products] in cmake/Warnings.cmake) and the one
// GCC 12 warning to silence there: avx512fintrin.h seeds conversions with _mm512_undefined_*(),
// which -Wmaybe-uninitialized reports once inlined (a false positive, as in adamw.cc).
#pragma once

#define TRI_X86_INTRINSICS_BEGIN                                  \
  _Pragma("GCC diagnostic push")                                  \
  _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")     \
  _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")
#define TRI_X86_INTRINSICS_END _Pragma("GCC diagnostic pop")

// The integer dot-product kernels: AVX-512 with VNNI, or AVX2.
#define TRI_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")))
#define TRI_AVX2 __attribute__((target("avx2,fma,f16c")))
