// Elementwise kernels: strided converting copies (DeviceOps::copy_strided), broadcasting
// binary arithmetic, affine maps, pointwise functions and their gradients, and dropout with
// the host's Philox mask (kernels/cpu/{binary,pointwise,dropout}.h).
#pragma once

#include <cstdint>

namespace trident::cuda {

inline constexpr int kMaxDims = 8;

// dst[i] = convert(src[i]) over an ndim-dim view (strides in elements; src strides may be 0).
void launch_copy_strided(void* dst, int dst_dtype, const int64_t* dst_strides, const void* src, int src_dtype,
                         const int64_t* src_strides, const int64_t* shape, int ndim);
// op: 0 add, 1 sub, 2 mul, 3 div (kernels::DeviceBinaryOp). out may alias a exactly.
void launch_binary(int op, int dtype, void* out, const int64_t* out_strides, const void* a, const int64_t* a_strides,
                   const void* b, const int64_t* b_strides, const int64_t* shape, int ndim);
void launch_scale_shift(int dtype, void* out, const void* a, double scale, double shift, int64_t n);
// op: kernels::DeviceUnaryOp's order (exp, log, tanh, sqrt, pow, gelu_tanh, gelu, silu).
void launch_unary(int op, int dtype, void* out, const void* x, double param, int64_t n);
void launch_unary_backward(int op, int dtype, void* dx, const void* dy, const void* saved, double param, int64_t n);
void launch_dropout(int dtype, void* out, const void* x, int64_t n, double p, uint64_t seed, uint64_t offset);

}  // namespace trident::cuda
