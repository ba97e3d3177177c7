// Embedding lookup (a gather of weight rows) and its gradient (a scatter-add of rows), on
// contiguous row-major buffers. T is float, double, bf16 or f16; I (the index type) is
// int32_t, int64_t or uint16_t. Indices must already be validated to lie in [0, V) (the
// front end in ops/embedding.cc does it); the kernels do not check them again.
//
//   embedding_forward:  out (N, C) = weight (V, C) [indices (N)]             semantics `=`
//   embedding_backward: grad_weight (V, C), row v = sum of grad_out (N, C) rows n with
//                       indices[n] == v, summed in acc_t<T> in increasing n and rounded once;
//                       rows no token uses are zero.                          semantics `=`
//
// Backward needs only the indices from the forward (nothing else is cached). Both kernels
// give bitwise the same result for any thread count (Note [Deterministic embedding
// backward] in embedding.cc).
#pragma once

#include <cstdint>

namespace trident::kernels::cpu {

template <class T, class I>
void embedding_forward(T* out, const T* weight, const I* indices, int64_t N, int64_t C);

template <class T, class I>
void embedding_backward(T* grad_weight, const T* grad_out, const I* indices, int64_t N, int64_t V,
                        int64_t C);

}  // namespace trident::kernels::cpu
