// The compute kernels a non-host device backend gives the op front ends (issue #7).
//
// The ops in src/ops validate their inputs, make them contiguous where the kernel needs it,
// allocate outputs on the inputs' device and then call a kernel. On the host that kernel is a
// template in kernels/cpu; on any other device it is a method of the backend's
// DeviceKernels, registered at start-up (the CUDA backend: kernels/cuda/cuda_kernels.cc).
// So the front ends, their checks and their error messages are shared by every device, and a
// backend only brings arithmetic.
//
// Every method mirrors the kernels/cpu function of the same name: same arguments (raw
// pointers into device memory, plus the storage dtype, since a virtual function cannot be a
// template), same shapes, same accumulation semantics (`=` unless stated). Methods that
// return a value to the host (cross_entropy_forward's loss, sum_of_squares) synchronize.
#pragma once

#include <cstdint>

#include "core/device.h"
#include "core/dtype.h"
#include "core/nf4_layout.h"
#include "core/rope_params.h"
#include "core/shape.h"

namespace trident::kernels {

enum class DeviceBinaryOp { kAdd, kSub, kMul, kDiv };
// Pointwise functions; `param` is pow's exponent (unused by the others).
enum class DeviceUnaryOp { kExp, kLog, kTanh, kSqrt, kPow, kGeluTanh, kGelu, kSilu };

// C (M, N) = alpha * op(A) op(B) + beta * C, row-major, op(X) = X or X^T; `batch` products
// with element strides stride_a/b/c between consecutive matrices. A and B have `dtype`; C has
// `c_dtype` (dtype, or f32 for bf16/f16 inputs: the fp32 accumulation of weight gradients).
struct GemmArgs {
  DType dtype = DType::kF32, c_dtype = DType::kF32;
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0;
  double alpha = 1.0;
  const void* a = nullptr;
  int64_t lda = 0;
  const void* b = nullptr;
  int64_t ldb = 0;
  double beta = 0.0;
  void* c = nullptr;
  int64_t ldc = 0;
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
  // Optional (batch 1 only): N values of c_dtype added to every row of C after the product (a
  // fused epilogue where the backend has one: cuBLASLt's). beta must then be 0.
  const void* bias = nullptr;
  // Optional (batch 1, beta 0): C gets gelu_tanh(product + bias) and pre_gelu (leading dim
  // ld_pre_gelu, c_dtype) the product + bias before it, which the GELU's backward reads. One
  // GEMM where the backend has the epilogue (cuBLASLt's GELU_AUX_BIAS).
  void* pre_gelu = nullptr;
  int64_t ld_pre_gelu = 0;
};

// A (B, heads, T, HS) attention operand: element (b, h, t, d) at
// data[b*batch_stride + h*head_stride + t*time_stride + d] (kernels/cpu/attention.h).
struct DeviceHeads {
  const void* data = nullptr;
  int64_t batch_stride = 0, head_stride = 0, time_stride = 0;
};

struct DeviceAttentionShape {
  int64_t B, NH, NKV, T, HS;
  bool causal;
  double scale;
  int64_t window;  // sliding window (kernels/cpu/attention.h); 0: none
  // Packed documents (Note [Document masks] in kernels/cpu/attention.h): (B, T) i64 on the
  // device each, or null.
  const int64_t* doc_start = nullptr;
  const int64_t* doc_end = nullptr;
};

struct DeviceAdamWStep {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;
};

class DeviceKernels {
 public:
  virtual ~DeviceKernels() = default;

  // Elementwise (kernels/cpu/binary.h, pointwise.h, dropout.h).
  virtual void binary(DeviceBinaryOp op, DType dtype, void* out, const Strides& out_strides, const void* a,
                      const Strides& a_strides, const void* b, const Strides& b_strides, const Shape& shape) = 0;
  virtual void scale_shift(DType dtype, void* out, const void* a, double scale, double shift, int64_t n) = 0;
  virtual void unary(DeviceUnaryOp op, DType dtype, void* out, const void* x, double param, int64_t n) = 0;
  // dx = dy * f'(.) from the saved tensor of kernels/cpu/pointwise.h (y for exp, tanh, sqrt; x otherwise).
  virtual void unary_backward(DeviceUnaryOp op, DType dtype, void* dx, const void* dy, const void* saved,
                              double param, int64_t n) = 0;
  virtual void dropout(DType dtype, void* out, const void* x, int64_t n, double p, uint64_t seed,
                       uint64_t offset) = 0;

  // Reductions (kernels/cpu/reduce.h, softmax.h).
  virtual void sum(DType dtype, void* out, const void* in, const Shape& shape, const Strides& strides,
                   const bool* reduce_dim, double scale) = 0;
  virtual void softmax(bool log, DType dtype, void* y, const void* x, int64_t outer, int64_t n, int64_t inner) = 0;
  virtual void softmax_backward(bool log, DType dtype, void* dx, const void* dy, const void* y, int64_t outer,
                                int64_t n, int64_t inner) = 0;
  // Sum of x^2 over n elements, in double, returned to the host.
  virtual double sum_of_squares(DType dtype, const void* x, int64_t n) = 0;

  // Matrix products (kernels/cpu/matmul.h).
  virtual void gemm(const GemmArgs& args) = 0;

  // Rotary position embedding on contiguous x (B, T, H, D) (kernels/cpu/rope.h); out may equal x.
  // positions: (B, T) i64 on the device, or null (pos0 + t).
  virtual void rope(DType dtype, void* out, const void* x, int64_t B, int64_t T, int64_t H, int64_t D,
                    const RopeParams& params, int64_t pos0, const int64_t* positions, bool inverse) = 0;

  // NF4 weights (kernels/cpu/nf4.h): weights [begin, end) of `w` dequantized into out (dtype).
  virtual void nf4_dequantize(DType dtype, void* out, const Nf4Data& w, int64_t begin, int64_t end) = 0;

  // Normalization (kernels/cpu/layernorm.h, rmsnorm.h): statistics in acc_t of dtype.
  virtual void layernorm_forward(DType dtype, void* out, void* mean, void* rstd, const void* x, const void* weight,
                                 const void* bias, int64_t N, int64_t C, double eps) = 0;
  virtual void layernorm_backward(DType dtype, void* dx, void* dweight, void* dbias, const void* dout,
                                  const void* x, const void* weight, const void* mean, const void* rstd,
                                  int64_t N, int64_t C) = 0;
  virtual void rmsnorm_forward(DType dtype, void* out, void* rstd, const void* x, const void* weight, int64_t N,
                               int64_t C, double eps) = 0;
  virtual void rmsnorm_backward(DType dtype, void* dx, void* dweight, const void* dout, const void* x,
                                const void* weight, const void* rstd, int64_t N, int64_t C) = 0;

  // Embedding and loss (kernels/cpu/embedding.h, cross_entropy.h); index_dtype i32, i64 or u16.
  virtual void embedding_forward(DType dtype, DType index_dtype, void* out, const void* weight,
                                 const void* indices, int64_t N, int64_t C) = 0;
  virtual void embedding_backward(DType dtype, DType index_dtype, void* grad_weight, const void* grad_out,
                                  const void* indices, int64_t N, int64_t V, int64_t C) = 0;
  // The multiple of elements that linear_cross_entropy pads its logits rows and its vocabulary
  // GEMMs to (Note [Padded logits] in ops/loss.cc): 64, so cuBLAS gets aligned rows and a
  // vocabulary dimension it runs at full speed.
  virtual int64_t logits_row_multiple() const { return kLogitsRowMultiple; }
  static constexpr int64_t kLogitsRowMultiple = 64;
  // Returns the sum of the row losses that are not ignored. Rows of logits and dlogits are
  // ld >= V elements apart (a padded stride keeps every row 16-byte aligned for the GEMMs).
  virtual double cross_entropy_forward(DType dtype, DType index_dtype, void* logsumexp, const void* logits,
                                       const void* targets, int64_t N, int64_t V, int64_t ld,
                                       int64_t ignore_index) = 0;
  virtual void cross_entropy_backward(DType dtype, DType index_dtype, void* dlogits, const void* logits,
                                      const void* logsumexp, const void* targets, int64_t N, int64_t V, int64_t ld,
                                      int64_t ignore_index, double scale) = 0;

  // Vocabulary-parallel cross-entropy's local passes (kernels/cpu/vocab_parallel_cross_entropy.h):
  // f32 logits (N, V), i64 targets.
  virtual void vocab_parallel_row_max(float* row_max, const float* logits, int64_t N, int64_t V) = 0;
  virtual void vocab_parallel_sums(double* sums, const float* logits, const float* row_max, const int64_t* targets,
                                   int64_t N, int64_t V, int64_t begin) = 0;
  virtual void vocab_parallel_backward(float* grad, const float* logits, const float* row_max, const double* sums,
                                       const int64_t* targets, int64_t N, int64_t V, int64_t begin,
                                       int64_t ignore_index, double scale) = 0;

  // A vocabulary-parallel embedding's local ids and mask (kernels/cpu/vocab_parallel_embedding.h).
  virtual void vocab_parallel_local_ids(int64_t* local, float* mask, const int64_t* ids, int64_t n, int64_t begin,
                                        int64_t rows) = 0;

  // Fused attention (kernels/cpu/attention.h); lse (B, NH, T) contiguous in acc_t of dtype.
  virtual void attention_forward(DType dtype, DeviceHeads out, void* lse, DeviceHeads q, DeviceHeads k,
                                 DeviceHeads v, const DeviceAttentionShape& shape) = 0;
  virtual void attention_backward(DType dtype, DeviceHeads dq, DeviceHeads dk, DeviceHeads dv, DeviceHeads dout,
                                  DeviceHeads q, DeviceHeads k, DeviceHeads v, DeviceHeads out, const void* lse,
                                  const DeviceAttentionShape& shape) = 0;

  // Optimizer (kernels/cpu/adamw.h): param and grad of dtype, m and v f32, in place.
  virtual void adamw_update(DType dtype, void* param, const void* grad, float* m, float* v, int64_t n,
                            const DeviceAdamWStep& step) = 0;

  // Many tensors of one dtype at once (fused optimizers' multi-tensor apply): n[k] elements at
  // each pointer. A backend with a one-launch kernel overrides sum_of_squares_multi; the
  // default calls the single-tensor kernel in turn (adding the tensors' sums in order).
  virtual double sum_of_squares_multi(DType dtype, const void* const* x, const int64_t* n, int64_t count) {
    double total = 0.0;
    for (int64_t k = 0; k < count; ++k) total += sum_of_squares(dtype, x[k], n[k]);
    return total;
  }
  // adamw_update on each of the `count` parameters, the bits of the single-tensor kernel. `out`
  // is optional (nullptr: none) and only for f32 parameters: per parameter n[k] elements of
  // out_dtype (bf16 or f16) that get the updated parameter rounded to nearest even, the bits of
  // a cast (copy_strided): mixed precision's fp32 masters stepped and rounded into the model in
  // one pass (Note [AdamW into the model] in optim/mixed_precision.cc).
  virtual void adamw_update_multi(DType dtype, void* const* param, const void* const* grad, float* const* m,
                                  float* const* v, void* const* out, DType out_dtype, const int64_t* n, int64_t count,
                                  const DeviceAdamWStep& step) = 0;
};

void register_device_kernels(DeviceType type, DeviceKernels* kernels);
// The kernels of `device`'s backend; throws, naming the device, when this build has none.
DeviceKernels& device_kernels(Device device);

}  // namespace trident::kernels
