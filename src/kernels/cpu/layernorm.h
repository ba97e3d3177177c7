// LayerNorm over the last dim of a row-major (N,C) view, llm.c style:
//   out = (x - mean) * rstd * weight + bias,   rstd = 1 / sqrt(var + eps)  (biased variance)
// weight and bias are each optional (null: ones / zeros).
//
// Forward caches mean and rstd (N) in acc_t<T> for the backward, which uses them instead of
// recomputing. Per-row sums run in acc_t<T> (float for f32/bf16/f16, double for f64); the
// sums over rows behind dweight and dbias run in double. Everything rounds once on store.
// Results are bitwise independent of the thread count (Note [Deterministic parameter
// gradients] in layernorm.cc).
//
// Accumulation semantics: `=` for every output (out, mean, rstd, dx, dweight, dbias);
// gradient accumulation across uses is the autograd engine's job.
// Does not: normalize over more than the last dim, or handle strided rows (the front end
// makes inputs contiguous).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace trident::kernels::cpu {

// out (N,C); mean, rstd (N) cached for backward; x (N,C); weight, bias (C) or null.
template <class T>
void layernorm_forward(T* out, acc_t<T>* mean, acc_t<T>* rstd, const T* x, const T* weight,
                       const T* bias, int64_t N, int64_t C, double eps);

// dx (N,C) or null; dweight (C) or null; dbias (C) or null; dout (N,C); x (N,C);
// weight (C) or null (as in the forward); mean, rstd (N) as cached by the forward.
// A null output is not computed.
template <class T>
void layernorm_backward(T* dx, T* dweight, T* dbias, const T* dout, const T* x, const T* weight,
                        const acc_t<T>* mean, const acc_t<T>* rstd, int64_t N, int64_t C);

}  // namespace trident::kernels::cpu
