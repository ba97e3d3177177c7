// RMSNorm over the last dim of a row-major (N,C) view, as in LLaMA and torch.nn.RMSNorm:
//   out = x * rstd * weight,   rstd = 1 / sqrt(mean(x^2) + eps)
// weight is optional (null: ones). There is no mean subtraction and no bias.
//
// Forward caches rstd (N) in acc_t<T> for the backward, which uses it instead of
// recomputing. Per-row sums run in acc_t<T>; the sum over rows behind dweight runs in
// double; everything rounds once on store (LLaMA's reference code rounds x * rstd to the
// storage dtype before multiplying by the weight: we do not, one rounding is more accurate).
// Results are bitwise independent of the thread count (Note [Deterministic parameter
// gradients] in layernorm.cc; rmsnorm.cc uses the same row-block scheme).
//
// Accumulation semantics: `=` for every output (out, rstd, dx, dweight).
// Does not handle strided rows (the front end makes inputs contiguous).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace trident::kernels::cpu {

// out (N,C); rstd (N) cached for backward; x (N,C); weight (C) or null.
template <class T>
void rmsnorm_forward(T* out, acc_t<T>* rstd, const T* x, const T* weight, int64_t N, int64_t C,
                     double eps);

// dx (N,C) or null; dweight (C) or null; dout (N,C); x (N,C); weight (C) or null (as in the
// forward); rstd (N) as cached by the forward. A null output is not computed.
template <class T>
void rmsnorm_backward(T* dx, T* dweight, const T* dout, const T* x, const T* weight,
                      const acc_t<T>* rstd, int64_t N, int64_t C);

}  // namespace trident::kernels::cpu
