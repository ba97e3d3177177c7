// The CUDA backend's compute kernels behind the op front ends (kernels::DeviceKernels):
// each method forwards to a launcher of the .cu files (plain types; dtypes as codes) or to
// cuBLAS, then checks the launch. Registered at start-up for DeviceType::kCUDA.
#include <cuda_runtime.h>

#include "kernels/cuda/adamw.cuh"
#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/cross_entropy.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/multi_tensor.cuh"
#include "kernels/cuda/norm.cuh"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/nf4.cuh"
#include "kernels/cuda/rope.cuh"
#include "kernels/cuda/vocab_parallel_cross_entropy.cuh"
#include "kernels/cuda/vocab_parallel_embedding.cuh"
#include "kernels/device/device_kernels.h"

namespace trident::cuda {
namespace {

int code(DType dtype) { return static_cast<int>(dtype); }

void check_launch() { TRI_CUDA_CHECK(cudaGetLastError()); }

Heads heads(const kernels::DeviceHeads& h) { return {h.data, h.batch_stride, h.head_stride, h.time_stride}; }

AttentionDims dims(const kernels::DeviceAttentionShape& s) {
  return {s.B, s.NH, s.NKV, s.T, s.HS, s.causal, s.scale, s.window, s.doc_start, s.doc_end};
}

class CudaKernels final : public kernels::DeviceKernels {
 public:
  void binary(kernels::DeviceBinaryOp op, DType dtype, void* out, const Strides& out_strides, const void* a,
              const Strides& a_strides, const void* b, const Strides& b_strides, const Shape& shape) override {
    Shape s = shape;
    Strides os = out_strides, as = a_strides, bs = b_strides;
    const int nd = coalesce_dims(s, os, as, bs);
    TRI_CHECK_NOT_IMPLEMENTED(nd <= kMaxDims, "binary on cuda: ", nd, " dims after merging (at most ", kMaxDims, ")");
    launch_binary(static_cast<int>(op), code(dtype), out, os.begin(), a, as.begin(), b, bs.begin(), s.begin(), nd);
    check_launch();
  }
  void scale_shift(DType dtype, void* out, const void* a, double scale, double shift, int64_t n) override {
    launch_scale_shift(code(dtype), out, a, scale, shift, n);
    check_launch();
  }
  void unary(kernels::DeviceUnaryOp op, DType dtype, void* out, const void* x, double param, int64_t n) override {
    launch_unary(static_cast<int>(op), code(dtype), out, x, param, n);
    check_launch();
  }
  void unary_backward(kernels::DeviceUnaryOp op, DType dtype, void* dx, const void* dy, const void* saved,
                      double param, int64_t n) override {
    launch_unary_backward(static_cast<int>(op), code(dtype), dx, dy, saved, param, n);
    check_launch();
  }
  void dropout(DType dtype, void* out, const void* x, int64_t n, double p, uint64_t seed, uint64_t offset) override {
    launch_dropout(code(dtype), out, x, n, p, seed, offset);
    check_launch();
  }
  void sum(DType dtype, void* out, const void* in, const Shape& shape, const Strides& strides, const bool* reduce_dim,
           double scale) override {
    launch_sum(code(dtype), out, in, shape.begin(), strides.begin(), reduce_dim, shape.size(), scale);
    check_launch();
  }
  void softmax(bool log, DType dtype, void* y, const void* x, int64_t outer, int64_t n, int64_t inner) override {
    launch_softmax_forward(log, code(dtype), y, x, outer, n, inner);
    check_launch();
  }
  void softmax_backward(bool log, DType dtype, void* dx, const void* dy, const void* y, int64_t outer, int64_t n,
                        int64_t inner) override {
    launch_softmax_backward(log, code(dtype), dx, dy, y, outer, n, inner);
    check_launch();
  }
  double sum_of_squares(DType dtype, const void* x, int64_t n) override {
    const double s = launch_sum_of_squares(code(dtype), x, n);
    check_launch();
    return s;
  }
  void gemm(const kernels::GemmArgs& args) override { cuda::gemm(args); }
  void rope(DType dtype, void* out, const void* x, int64_t B, int64_t T, int64_t H, int64_t D,
            const RopeParams& params, int64_t pos0, const int64_t* positions, bool inverse) override {
    launch_rope(code(dtype), out, x, B, T, H, D, params, pos0, positions, inverse);
    check_launch();
  }
  void nf4_dequantize(DType dtype, void* out, const Nf4Data& w, int64_t begin, int64_t end) override {
    launch_nf4_dequantize(code(dtype), out, w, begin, end);
    check_launch();
  }
  void layernorm_forward(DType dtype, void* out, void* mean, void* rstd, const void* x, const void* weight,
                         const void* bias, int64_t N, int64_t C, double eps) override {
    launch_layernorm_forward(code(dtype), out, mean, rstd, x, weight, bias, N, C, eps);
    check_launch();
  }
  void layernorm_backward(DType dtype, void* dx, void* dweight, void* dbias, const void* dout, const void* x,
                          const void* weight, const void* mean, const void* rstd, int64_t N, int64_t C) override {
    launch_layernorm_backward(code(dtype), dx, dweight, dbias, dout, x, weight, mean, rstd, N, C);
    check_launch();
  }
  void rmsnorm_forward(DType dtype, void* out, void* rstd, const void* x, const void* weight, int64_t N, int64_t C,
                       double eps) override {
    launch_rmsnorm_forward(code(dtype), out, rstd, x, weight, N, C, eps);
    check_launch();
  }
  void rmsnorm_backward(DType dtype, void* dx, void* dweight, const void* dout, const void* x, const void* weight,
                        const void* rstd, int64_t N, int64_t C) override {
    launch_rmsnorm_backward(code(dtype), dx, dweight, dout, x, weight, rstd, N, C);
    check_launch();
  }
  void embedding_forward(DType dtype, DType index_dtype, void* out, const void* weight, const void* indices, int64_t N,
                         int64_t C) override {
    launch_embedding_forward(code(dtype), code(index_dtype), out, weight, indices, N, C);
    check_launch();
  }
  void embedding_backward(DType dtype, DType index_dtype, void* grad_weight, const void* grad_out, const void* indices,
                          int64_t N, int64_t V, int64_t C) override {
    launch_embedding_backward(code(dtype), code(index_dtype), grad_weight, grad_out, indices, N, V, C);
    check_launch();
  }
  double cross_entropy_forward(DType dtype, DType index_dtype, void* logsumexp, const void* logits,
                               const void* targets, int64_t N, int64_t V, int64_t ld, int64_t ignore_index) override {
    const double total = launch_cross_entropy_forward(code(dtype), code(index_dtype), logsumexp, logits, targets, N, V,
                                                      ld, ignore_index);
    check_launch();
    return total;
  }
  void cross_entropy_backward(DType dtype, DType index_dtype, void* dlogits, const void* logits,
                              const void* logsumexp, const void* targets, int64_t N, int64_t V, int64_t ld,
                              int64_t ignore_index, double scale) override {
    launch_cross_entropy_backward(code(dtype), code(index_dtype), dlogits, logits, logsumexp, targets, N, V, ld,
                                  ignore_index, scale);
    check_launch();
  }
  void vocab_parallel_row_max(float* row_max, const float* logits, int64_t N, int64_t V) override {
    launch_vocab_parallel_row_max(row_max, logits, N, V);
    check_launch();
  }
  void vocab_parallel_local_ids(int64_t* local, float* mask, const int64_t* ids, int64_t n, int64_t begin,
                                int64_t rows) override {
    launch_vocab_parallel_local_ids(local, mask, ids, n, begin, rows);
    check_launch();
  }
  void vocab_parallel_sums(double* sums, const float* logits, const float* row_max, const int64_t* targets, int64_t N,
                           int64_t V, int64_t begin) override {
    launch_vocab_parallel_sums(sums, logits, row_max, targets, N, V, begin);
    check_launch();
  }
  void vocab_parallel_backward(float* grad, const float* logits, const float* row_max, const double* sums,
                               const int64_t* targets, int64_t N, int64_t V, int64_t begin, int64_t ignore_index,
                               double scale) override {
    launch_vocab_parallel_backward(grad, logits, row_max, sums, targets, N, V, begin, ignore_index, scale);
    check_launch();
  }
  void attention_forward(DType dtype, kernels::DeviceHeads out, void* lse, kernels::DeviceHeads q,
                         kernels::DeviceHeads k, kernels::DeviceHeads v,
                         const kernels::DeviceAttentionShape& shape) override {
    launch_attention_forward(code(dtype), heads(out), lse, heads(q), heads(k), heads(v), dims(shape));
    check_launch();
  }
  void attention_backward(DType dtype, kernels::DeviceHeads dq, kernels::DeviceHeads dk, kernels::DeviceHeads dv,
                          kernels::DeviceHeads dout, kernels::DeviceHeads q, kernels::DeviceHeads k,
                          kernels::DeviceHeads v, kernels::DeviceHeads out, const void* lse,
                          const kernels::DeviceAttentionShape& shape) override {
    launch_attention_backward(code(dtype), heads(dq), heads(dk), heads(dv), heads(dout), heads(q), heads(k), heads(v),
                              heads(out), lse, dims(shape));
    check_launch();
  }
  void adamw_update(DType dtype, void* param, const void* grad, float* m, float* v, int64_t n,
                    const kernels::DeviceAdamWStep& s) override {
    launch_adamw(code(dtype), param, grad, m, v, n, AdamWHyper{s.lr, s.beta1, s.beta2, s.eps, s.weight_decay, s.step});
    check_launch();
  }
  double sum_of_squares_multi(DType dtype, const void* const* x, const int64_t* n, int64_t count) override {
    const double s = launch_sum_of_squares_multi(code(dtype), x, n, count);
    check_launch();
    return s;
  }
  void adamw_update_multi(DType dtype, void* const* param, const void* const* grad, float* const* m, float* const* v,
                          void* const* out, DType out_dtype, const int64_t* n, int64_t count,
                          const kernels::DeviceAdamWStep& s) override {
    launch_adamw_multi(code(dtype), param, grad, m, v, out, code(out_dtype), n, count,
                       AdamWHyper{s.lr, s.beta1, s.beta2, s.eps, s.weight_decay, s.step});
    check_launch();
  }
};

const bool registered = [] {
  static CudaKernels kernels;  // stateless; static storage so it outlives every tensor
  kernels::register_device_kernels(DeviceType::kCUDA, &kernels);
  return true;
}();

}  // namespace
}  // namespace trident::cuda
