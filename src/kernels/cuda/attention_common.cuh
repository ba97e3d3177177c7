// What the attention kernels' two paths share (attention.cu launches them; the design is
// described there): strided head views, the problem's shape and its masks, the accumulation
// type's math, shared-memory plumbing, and each path's entry point.
#pragma once

#include <cuda_runtime.h>
#include <math_constants.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/cuda_types.cuh"

namespace trident::cuda::attention_detail {

// ---------------------------------------------------------------------------------------
// Shared pieces

template <class T>
struct View {
  T* data;
  int64_t bs, hs, ts;
  __device__ __forceinline__ T* row(int64_t b, int64_t h, int64_t t) const {
    return data + b * bs + h * hs + t * ts;
  }
};

template <class T>
View<T> view_of(const Heads& x) {
  return {static_cast<T*>(const_cast<void*>(x.data)), x.batch_stride, x.head_stride, x.time_stride};
}

struct Shape {
  int B, NH, group, T, HS;  // group = NH / NKV query heads per kv head
  bool causal;
  int window;  // sliding window (Note [Sliding window] in kernels/cpu/attention.h); 0: none
  // (B, T) device arrays or null (Note [Document masks] in kernels/cpu/attention.h).
  const int64_t* doc_start;
  const int64_t* doc_end;

  // The rules of cpu::AttentionShape: query qi of row b sees keys [first_key(b, qi), qi] under
  // the causal mask; key `key` is seen by queries [key, queries_end(b, key)). Both move right
  // with their argument, so tile skipping by a tile's first query / last key stays valid.
  // A padding row or key (>= T) takes the document of position T - 1, so that no read leaves
  // the arrays; what it computes is never stored.
  __device__ __forceinline__ int first_key(int64_t b, int qi) const {
    const int first = window > 0 ? max(0, qi - window + 1) : 0;
    return doc_start ? max(first, static_cast<int>(doc_start[b * T + min(qi, T - 1)])) : first;
  }
  __device__ __forceinline__ int queries_end(int64_t b, int key) const {
    const int end = window > 0 ? min(T, key + window) : T;
    return doc_end ? min(end, static_cast<int>(doc_end[b * T + min(key, T - 1)])) : end;
  }
  // Whether query qi sees key `key`, from the query's bound (first = first_key(b, qi); for
  // query-major loops, which hoist it per row) or from the key's (end = queries_end(b, key); for
  // key-major loops). The two agree: the document of qi starts at or before key exactly when
  // that of key ends after qi.
  __device__ __forceinline__ bool sees_from(int first, int key, int qi) const {
    return !causal || (first <= key && key <= qi);
  }
  __device__ __forceinline__ bool seen_until(int end, int key, int qi) const {
    return !causal || (key <= qi && qi < end);
  }
  __device__ __forceinline__ bool sees(int64_t b, int key, int qi) const {
    return sees_from(first_key(b, qi), key, qi);
  }
};

inline Shape shape_of(const AttentionDims& d) {
  return {static_cast<int>(d.B), static_cast<int>(d.NH), static_cast<int>(d.NH / d.NKV),
          static_cast<int>(d.T), static_cast<int>(d.HS), d.causal, static_cast<int>(d.window),
          d.doc_start, d.doc_end};
}

__device__ __forceinline__ float exp_acc(float x) { return expf(x); }
__device__ __forceinline__ double exp_acc(double x) { return exp(x); }
__device__ __forceinline__ float log_acc(float x) { return logf(x); }
__device__ __forceinline__ double log_acc(double x) { return log(x); }
template <class A>
__device__ __forceinline__ A minus_inf() {
  return std::is_same<A, double>::value ? static_cast<A>(-CUDART_INF) : static_cast<A>(-CUDART_INF_F);
}

template <class T>
inline constexpr bool kHalfLike = std::is_same<T, bf16_t>::value || std::is_same<T, f16_t>::value;

struct DeviceInfo {
  int major, max_smem;  // compute capability major, opt-in shared memory per block (bytes)
};

template <class Kernel>
void allow_smem(Kernel kernel, size_t bytes) {
  if (bytes > (48u << 10))
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
}

// One declaration for every kernel's dynamic shared memory (128-byte aligned for ldmatrix and
// cp.async, 8-byte for the generic kernels' doubles).
__device__ __forceinline__ unsigned char* dynamic_smem() {
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  return smem_bytes;
}

// The generic SIMT path (attention_generic.cu): every dtype and head size. lse and delta are
// acc_t of the dtype.
void generic_forward(int dtype, Heads out, void* lse, Heads q, Heads k, Heads v, const Shape& s, double scale,
                     int max_smem);
void generic_backward(int dtype, Heads dq, Heads dk, Heads dv, Heads dout, Heads q, Heads k, Heads v,
                      const void* lse, const void* delta, const Shape& s, double scale, int max_smem);

// The tensor-core path (attention_tensor_core.cu): bf16 and f16 on sm_80+, for the shapes and
// layouts tensor_core_shape and rows_aligned accept. lse and delta are float.
bool tensor_core_shape(int dtype, const AttentionDims& d, const DeviceInfo& dev);
bool rows_aligned(const Heads& x, int64_t B, int64_t heads, int64_t T);
void tensor_core_forward(int dtype, Heads out, float* lse, Heads q, Heads k, Heads v, const Shape& s, double scale);
void tensor_core_backward(int dtype, Heads dq, Heads dk, Heads dv, Heads dout, Heads q, Heads k, Heads v,
                          const float* lse, const float* delta, const Shape& s, double scale);

}  // namespace trident::cuda::attention_detail
