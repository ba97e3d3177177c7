#include "kernels/cuda/gemm.h"

#include <cublas_v2.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/check.h"

namespace trident::cuda {
namespace {

#define TRI_CUBLAS_CHECK(call)                                                                                  \
  do {                                                                                                          \
    const cublasStatus_t tri_cublas_status_ = (call);                                                           \
    TRI_CHECK(tri_cublas_status_ == CUBLAS_STATUS_SUCCESS, "cuBLAS error ", cublasGetStatusName(tri_cublas_status_), \
              " (", cublasGetStatusString(tri_cublas_status_), ") in ", #call);                                   \
  } while (0)

std::atomic<bool>& tf32_flag() {
  static std::atomic<bool> flag{[] {
    const char* env = std::getenv("TRIDENT_CUDA_TF32");
    return env != nullptr && std::strcmp(env, "1") == 0;
  }()};
  return flag;
}

cublasHandle_t handle() {
  // One handle for the process (device 0, default stream); leaked on purpose: destroying it
  // at exit can race the driver's own teardown.
  static cublasHandle_t h = [] {
    cublasHandle_t created = nullptr;
    TRI_CUBLAS_CHECK(cublasCreate(&created));
    // bf16/f16 outputs: no reduced-precision split-K reductions, so sums stay in fp32 as on the host.
    TRI_CUBLAS_CHECK(cublasSetMathMode(created, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                                                          CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    return created;
  }();
  return h;
}

cudaDataType_t cuda_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kF64: return CUDA_R_64F;
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
    default: break;
  }
  TRI_CHECK_TYPE(false, "gemm on cuda: dtype ", dtype, " is not supported (expected f32, f64, bf16 or f16)");
  return CUDA_R_32F;
}

}  // namespace

void set_allow_tf32(bool allow) { tf32_flag() = allow; }
bool allow_tf32() { return tf32_flag(); }

void gemm(const kernels::GemmArgs& g) {
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  TRI_CHECK(g.c_dtype == g.dtype || (g.c_dtype == DType::kF32 && (g.dtype == DType::kBF16 || g.dtype == DType::kF16)),
            "gemm on cuda: output dtype ", g.c_dtype, " for inputs of dtype ", g.dtype,
            " (expected the same, or f32 for bf16/f16)");
  for (int64_t v : {g.M, g.N, g.K, g.lda, g.ldb, g.ldc})
    TRI_CHECK(v <= INT32_MAX, "gemm on cuda: size ", v, " exceeds cuBLAS's 32-bit dimensions");
  // cuBLAS is column-major: a row-major C (M, N) is a column-major C^T (N, M), and
  // C^T = op(B)^T op(A)^T, so the operands swap places and keep their own transposes.
  const cublasOperation_t op_a = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const bool f64 = g.dtype == DType::kF64;
  const cublasComputeType_t compute =
      f64 ? CUBLAS_COMPUTE_64F : (g.dtype == DType::kF32 && allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
  const double alpha_d = g.alpha, beta_d = g.beta;
  const float alpha_f = static_cast<float>(g.alpha), beta_f = static_cast<float>(g.beta);
  const void* alpha = f64 ? static_cast<const void*>(&alpha_d) : static_cast<const void*>(&alpha_f);
  const void* beta = f64 ? static_cast<const void*>(&beta_d) : static_cast<const void*>(&beta_f);
  const int M = static_cast<int>(g.M), N = static_cast<int>(g.N), K = static_cast<int>(g.K);
  // A K = 0 product is beta * C; cuBLAS handles it, but needs leading dims >= 1.
  const int lda = static_cast<int>(std::max<int64_t>(g.lda, 1)), ldb = static_cast<int>(std::max<int64_t>(g.ldb, 1)),
            ldc = static_cast<int>(std::max<int64_t>(g.ldc, 1));
  if (g.batch == 1) {
    TRI_CUBLAS_CHECK(cublasGemmEx(handle(), op_b, op_a, N, M, K, alpha, g.b, cuda_type(g.dtype), ldb, g.a,
                                  cuda_type(g.dtype), lda, beta, g.c, cuda_type(g.c_dtype), ldc, compute,
                                  CUBLAS_GEMM_DEFAULT));
  } else {
    TRI_CHECK(g.batch <= INT32_MAX, "gemm on cuda: batch ", g.batch, " exceeds cuBLAS's 32-bit count");
    TRI_CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle(), op_b, op_a, N, M, K, alpha, g.b, cuda_type(g.dtype), ldb,
                                                g.stride_b, g.a, cuda_type(g.dtype), lda, g.stride_a, beta, g.c,
                                                cuda_type(g.c_dtype), ldc, g.stride_c, static_cast<int>(g.batch),
                                                compute, CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace trident::cuda
