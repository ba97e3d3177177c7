// What every .cu file of the CUDA backend shares: trident's dtype codes as CUDA types, the
// accumulation type, conversions, dtype dispatch for launchers, and launch geometry.
// Launchers (declared in the per-kernel .cuh headers) take plain types only (void*, int dtype
// codes, int64_t), because .cu files compile as C++17 and must not see the C++20 core headers;
// kernels/cuda/cuda_kernels.cc bridges them to kernels::DeviceKernels. Everything runs on the
// current device's default stream; the caller checks cudaGetLastError() after each launch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "kernels/cuda/scratch.h"

namespace trident::cuda {

// trident::DType's order (core/dtype.h).
enum DTypeCode : int { kF32 = 0, kF64 = 1, kBF16 = 2, kF16 = 3, kI32 = 4, kI64 = 5, kU16 = 6 };

using bf16_t = __nv_bfloat16;
using f16_t = __half;

// Math runs in float for f32/bf16/f16 and in double for f64, as on the host (acc_t<T>).
template <class T>
struct AccOf {
  using type = float;
};
template <>
struct AccOf<double> {
  using type = double;
};
template <class T>
using acc_t = typename AccOf<T>::type;

template <class T>
__host__ __device__ __forceinline__ acc_t<T> to_acc(T x) {
  return static_cast<acc_t<T>>(x);
}
template <>
__host__ __device__ __forceinline__ float to_acc<bf16_t>(bf16_t x) {
  return __bfloat162float(x);
}
template <>
__host__ __device__ __forceinline__ float to_acc<f16_t>(f16_t x) {
  return __half2float(x);
}

// Round once, to nearest even, on store.
template <class T>
__host__ __device__ __forceinline__ T from_acc(acc_t<T> x) {
  return static_cast<T>(x);
}
template <>
__host__ __device__ __forceinline__ bf16_t from_acc<bf16_t>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__host__ __device__ __forceinline__ f16_t from_acc<f16_t>(float x) {
  return __float2half_rn(x);
}

template <class T>
struct TypeTag {
  using type = T;
};

[[noreturn]] inline void bad_dtype(const char* what, int code) {
  std::fprintf(stderr, "trident: CUDA %s: unsupported dtype code %d\n", what, code);
  std::abort();  // the op front ends dispatch only supported dtypes: this is a bug
}

// fn(TypeTag<T>{}) for the floating dtype `code`:
//   dispatch_floating(code, "layernorm", [&](auto tag) { using T = typename decltype(tag)::type; ... });
template <class Fn>
void dispatch_floating(int code, const char* what, Fn&& fn) {
  switch (code) {
    case kF32: return fn(TypeTag<float>{});
    case kF64: return fn(TypeTag<double>{});
    case kBF16: return fn(TypeTag<bf16_t>{});
    case kF16: return fn(TypeTag<f16_t>{});
    default: bad_dtype(what, code);
  }
}

template <class Fn>
void dispatch_index(int code, const char* what, Fn&& fn) {
  switch (code) {
    case kI32: return fn(TypeTag<int32_t>{});
    case kI64: return fn(TypeTag<int64_t>{});
    case kU16: return fn(TypeTag<uint16_t>{});
    default: bad_dtype(what, code);
  }
}

// Any dtype (copies and casts).
template <class Fn>
void dispatch_all(int code, const char* what, Fn&& fn) {
  switch (code) {
    case kI32: return fn(TypeTag<int32_t>{});
    case kI64: return fn(TypeTag<int64_t>{});
    case kU16: return fn(TypeTag<uint16_t>{});
    default: return dispatch_floating(code, what, fn);
  }
}

// Blocks for a grid-stride loop over n items with `threads` per block (at least 1 block).
inline unsigned grid_for(int64_t n, int threads, int64_t max_blocks = 65535LL * 8) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks < 1) blocks = 1;
  if (blocks > max_blocks) blocks = max_blocks;
  return static_cast<unsigned>(blocks);
}

// Grid-stride loop index helpers.
__device__ __forceinline__ int64_t global_thread() {
  return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_threads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// Sum over a warp (every lane gets the total).
template <class A>
__device__ __forceinline__ A warp_sum(A x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
template <class A>
__device__ __forceinline__ A warp_max(A x) {
  for (int o = 16; o > 0; o >>= 1) {
    const A y = __shfl_xor_sync(0xffffffffu, x, o);
    x = y > x ? y : x;
  }
  return x;
}

// Sum over a block of blockDim.x (a multiple of 32, at most 1024) threads; every thread gets
// the total. `scratch` is shared memory of at least 32 A. Synchronizes the block.
template <class A>
__device__ __forceinline__ A block_sum(A x, A* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  x = warp_sum(x);
  __syncthreads();  // scratch may still be read from a previous call
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  x = lane < warps ? scratch[lane] : A(0);
  return warp_sum(x);
}
template <class A>
__device__ __forceinline__ A block_max(A x, A* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  x = warp_max(x);
  __syncthreads();
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  x = lane < warps ? scratch[lane] : scratch[0];
  return warp_max(x);
}

// A row's owner in row kernels: a warp (kWarp) or the whole block, rows grid-strided. The row
// loop condition is the same for all of its threads, so the warp shuffles (full mask) and block
// barriers inside it are safe.
template <bool kWarp>
struct RowGroup {
  __device__ static int64_t first_row() {
    return kWarp ? blockIdx.x * static_cast<int64_t>(blockDim.x >> 5) + (threadIdx.x >> 5)
                 : static_cast<int64_t>(blockIdx.x);
  }
  __device__ static int64_t row_stride() {
    return kWarp ? static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5) : static_cast<int64_t>(gridDim.x);
  }
  __device__ static int lane() { return kWarp ? static_cast<int>(threadIdx.x & 31) : static_cast<int>(threadIdx.x); }
  __device__ static int size() { return kWarp ? 32 : static_cast<int>(blockDim.x); }
  template <class A>
  __device__ static A sum(A x, A* scratch) {
    if constexpr (kWarp)
      return warp_sum(x);
    else
      return block_sum(x, scratch);
  }
  template <class A>
  __device__ static A max(A x, A* scratch) {
    if constexpr (kWarp)
      return warp_max(x);
    else
      return block_max(x, scratch);
  }
};

// Elements of T in a 16-byte vector (one uint4 access), and whether a pointer allows it.
template <class T>
inline constexpr int kVec = 16 / static_cast<int>(sizeof(T));
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace trident::cuda
