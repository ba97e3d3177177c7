// Matrix products (no autograd).
//   matmul(a, b): a (..., M, K) @ b (..., K, N) -> (..., M, N); batch dims broadcast.
//     Operands whose last two dims are a transposed matrix (strides (1, ld)) are passed to
//     BLAS as transposed, without a copy. When b is one matrix, a's batch dims fold into M
//     and the whole product is a single GEMM.
//   linear(x, w, bias): x (..., in) @ w^T + bias with w (out, in), bias (out): PyTorch's
//     nn.functional.linear, one GEMM with the bias as its initial C.
//   linear_gelu_tanh(x, w, bias): out = gelu_tanh(linear(x, w, bias)), and the linear's result
//     pre_gelu, which the GELU's backward needs: a GPT-2 MLP's first layer. On a device with a
//     GELU epilogue (cuBLASLt) one GEMM writes both; on the host the GELU follows the GEMM, so
//     the bits are exactly those of linear and gelu_tanh.
#pragma once

#include <optional>

#include "core/tensor.h"

namespace trident::ops {

Tensor matmul(const Tensor& a, const Tensor& b);
Tensor linear(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias);

struct LinearGelu {
  Tensor out, pre_gelu;
};
LinearGelu linear_gelu_tanh(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias);

// Views `t` (..., R, C) as a 2-D matrix (rows, C) if its leading dims fold without a copy and
// its last dim is unit-stride; otherwise makes a contiguous copy first.
Tensor as_matrix(const Tensor& t);

}  // namespace trident::ops
