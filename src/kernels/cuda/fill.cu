#include "kernels/cuda/fill.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdio>

namespace trident::cuda {
namespace {

template <class T>
__global__ void fill_kernel(T* dst, int64_t n, T value) {
  // Grid-stride loop: any n with a bounded grid.
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = value;
}

template <class T>
void launch(void* dst, int64_t n, T value) {
  const int threads = 256;
  const int64_t wanted = (n + threads - 1) / threads;
  const int blocks = static_cast<int>(wanted < 65535 ? wanted : 65535);
  if (blocks > 0) fill_kernel<T><<<blocks, threads>>>(static_cast<T*>(dst), n, value);
}

}  // namespace

void launch_fill(void* dst, int dtype_code, int64_t n, double value) {
  switch (dtype_code) {
    case 0: return launch<float>(dst, n, static_cast<float>(value));
    case 1: return launch<double>(dst, n, value);
    case 2: return launch<__nv_bfloat16>(dst, n, __double2bfloat16(value));
    case 3: return launch<__half>(dst, n, __double2half(value));
    case 4: return launch<int32_t>(dst, n, static_cast<int32_t>(value));
    case 5: return launch<int64_t>(dst, n, static_cast<int64_t>(value));
    case 6: return launch<uint16_t>(dst, n, static_cast<uint16_t>(value));
    default: std::fprintf(stderr, "trident: launch_fill: unknown dtype code %d\n", dtype_code);
  }
}

}  // namespace trident::cuda
