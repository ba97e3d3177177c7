// Fused scaled-dot-product attention on the GPU, FlashAttention-2 style: neither direction
// materializes the (T, T) scores. Same contract as kernels/cpu/attention.h (strided heads with
// a unit-stride head dim, grouped-query attention, optional causal mask with an optional sliding
// window and packed-document masks, lse cached in acc_t).
// dtype codes as in cuda_types.cuh; lse is float (double for f64).
#pragma once

#include <cstdint>

namespace trident::cuda {

struct Heads {
  const void* data;
  int64_t batch_stride, head_stride, time_stride;  // elements; the head dim is unit-stride
};

struct AttentionDims {
  int64_t B, NH, NKV, T, HS;
  bool causal;
  double scale;
  int64_t window;  // sliding window: query i sees keys (i - window, i]; 0: none (needs causal)
  // (B, T) i64 on the device each, or null (Note [Document masks] in kernels/cpu/attention.h):
  // query t of row b sees no key before doc_start[b*T + t] (causal only).
  const int64_t* doc_start = nullptr;
  const int64_t* doc_end = nullptr;
};

// out (B, NH, T, HS) `=`; lse (B, NH, T) contiguous `=`.
void launch_attention_forward(int dtype, Heads out, void* lse, Heads q, Heads k, Heads v, const AttentionDims& d);
// dq (B, NH, T, HS), dk and dv (B, NKV, T, HS): `=` (dk, dv sum over the query heads of their group).
void launch_attention_backward(int dtype, Heads dq, Heads dk, Heads dv, Heads dout, Heads q, Heads k, Heads v,
                               Heads out, const void* lse, const AttentionDims& d);

}  // namespace trident::cuda
