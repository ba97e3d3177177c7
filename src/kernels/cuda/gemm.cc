#include "kernels/cuda/gemm.h"

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "core/check.h"
#include "core/kernel_switches.h"
#include "kernels/cuda/cublas_library.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/scratch.h"

namespace trident::cuda {
namespace {

#define TRI_CUBLAS_CHECK(call)                                                                                  \
  do {                                                                                                          \
    const cublasStatus_t tri_cublas_status_ = (call);                                                           \
    TRI_CHECK(tri_cublas_status_ == CUBLAS_STATUS_SUCCESS, "cuBLAS error ", cublas().cublasGetStatusName(tri_cublas_status_), \
              " (", cublas().cublasGetStatusString(tri_cublas_status_), ") in ", #call);                                   \
  } while (0)

cublasHandle_t handle() {
  // One handle for the process (device 0, default stream); leaked on purpose: destroying it
  // at exit can race the driver's own teardown.
  static cublasHandle_t h = [] {
    cublasHandle_t created = nullptr;
    TRI_CUBLAS_CHECK(cublas().cublasCreate(&created));
    // bf16/f16 outputs: no reduced-precision split-K reductions, so sums stay in fp32 as on the host.
    TRI_CUBLAS_CHECK(cublas().cublasSetMathMode(created, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
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

// cuBLASLt: the same products with a fused bias epilogue, and the heuristic's algorithm cached
// per problem (shape, layouts, dtypes, pointer alignment), since asking costs more than a small
// GEMM. Descriptors live as long as the process, like the handles.
constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;  // what cuBLAS itself uses on Hopper

cublasLtHandle_t lt_handle() {
  static cublasLtHandle_t h = [] {
    cublasLtHandle_t created = nullptr;
    TRI_CUBLAS_CHECK(cublas().cublasLtCreate(&created));
    return created;
  }();
  return h;
}

void* lt_workspace() {
  static void* w = [] {
    void* p = nullptr;
    scratch_malloc(&p, kLtWorkspaceBytes);  // throws when out of memory; kept for the process
    return p;
  }();
  return w;
}

struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool usable = false;  // false: no algorithm for it; use cublasGemmEx
};

// Everything a plan depends on, each operand's pointer alignment included.
using LtKey = std::array<int64_t, 22>;

// The largest power of two up to 256 that divides p's address: cuBLASLt picks kernels by it, and
// views into flat buffers (ZeRO's shards, sliced columns) can be as little as 2-byte aligned.
uint32_t alignment(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && v % a != 0) a /= 2;
  return a;
}

cublasStatus_t set_layout_batch(cublasLtMatrixLayout_t layout, int batch, int64_t stride) {
  const cublasStatus_t st =
      cublas().cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  return cublas().cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
}

// The plan for g (column-major view as in gemm(): m = N, n = M, operands swapped).
LtPlan& lt_plan(const kernels::GemmArgs& g, cublasComputeType_t compute) {
  static std::mutex mutex;
  static std::map<LtKey, LtPlan> plans;
  const LtKey key{static_cast<int>(g.dtype), static_cast<int>(g.c_dtype), g.trans_a, g.trans_b, g.M, g.N, g.K,
                  g.lda, g.ldb, g.ldc, g.batch, g.stride_a, g.stride_b, g.stride_c,
                  g.pre_gelu ? g.ld_pre_gelu : -1, static_cast<int>(compute), alignment(g.a), alignment(g.b),
                  alignment(g.c), g.bias ? alignment(g.bias) : 0, g.pre_gelu ? alignment(g.pre_gelu) : 0, 0};
  std::lock_guard<std::mutex> lock(mutex);
  const auto found = plans.find(key);
  if (found != plans.end()) return found->second;  // std::map: references stay valid
  LtPlan& plan = plans[key];
  // Any step cuBLASLt refuses (a layout it cannot describe, no algorithm) leaves the plan
  // unusable, and the product goes to cublasGemmEx instead.
  bool ok = true;
  auto step = [&](cublasStatus_t status) { ok = ok && status == CUBLAS_STATUS_SUCCESS; };
  const cublasOperation_t op_a = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  step(cublas().cublasLtMatmulDescCreate(&plan.op, compute, CUDA_R_32F));
  if (!ok) return plan;
  // Lt's A is our B and Lt's B our A (C^T = op(B)^T op(A)^T).
  step(cublas().cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof op_b));
  step(cublas().cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof op_a));
  const cublasLtEpilogue_t epilogue =
      g.pre_gelu ? (g.bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                 : (g.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
  step(cublas().cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
  if (g.pre_gelu) {  // the GELU's input (the aux matrix) has C's shape and dtype
    const int64_t ld = g.ld_pre_gelu;
    step(cublas().cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
    step(cublas().cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g.pre_gelu,
                                        sizeof g.pre_gelu));
  }
  if (g.bias) {
    const int32_t bias_type = cuda_type(g.c_dtype);
    step(cublas().cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
    // The heuristic reads the pointer's alignment; each call sets its own pointer.
    step(cublas().cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof g.bias));
  }
  const uint64_t m = static_cast<uint64_t>(g.N), n = static_cast<uint64_t>(g.M), k = static_cast<uint64_t>(g.K);
  const cudaDataType_t in_type = cuda_type(g.dtype), out_type = cuda_type(g.c_dtype);
  step(cublas().cublasLtMatrixLayoutCreate(&plan.a, in_type, g.trans_b ? k : m, g.trans_b ? m : k, g.ldb));
  step(cublas().cublasLtMatrixLayoutCreate(&plan.b, in_type, g.trans_a ? n : k, g.trans_a ? k : n, g.lda));
  step(cublas().cublasLtMatrixLayoutCreate(&plan.c, out_type, m, n, g.ldc));
  if (ok && g.batch > 1) {
    const int batch = static_cast<int>(g.batch);
    step(set_layout_batch(plan.a, batch, g.stride_b));
    step(set_layout_batch(plan.b, batch, g.stride_a));
    step(set_layout_batch(plan.c, batch, g.stride_c));
  }
  if (!ok) return plan;
  cublasLtMatmulPreference_t pref = nullptr;
  step(cublas().cublasLtMatmulPreferenceCreate(&pref));
  if (!ok) return plan;
  const uint64_t workspace = kLtWorkspaceBytes;
  step(cublas().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                            sizeof workspace));
  // Split-K partial sums only in fp32 (never in a bf16/f16 output), as the host sums.
  const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  step(cublas().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
                                            sizeof schemes));
  // The operands' real alignments (the default assumes 256 bytes); Lt's A is our b.
  const uint32_t align_a = alignment(g.b), align_b = alignment(g.a), align_c = alignment(g.c);
  step(cublas().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a));
  step(cublas().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof align_b));
  step(cublas().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof align_c));
  step(cublas().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof align_c));
  cublasLtMatmulHeuristicResult_t result{};
  int found_count = 0;
  if (ok)
    step(cublas().cublasLtMatmulAlgoGetHeuristic(lt_handle(), plan.op, plan.a, plan.b, plan.c, plan.c, pref, 1, &result,
                                        &found_count));
  cublas().cublasLtMatmulPreferenceDestroy(pref);
  plan.usable = ok && found_count > 0 && result.state == CUBLAS_STATUS_SUCCESS;
  if (plan.usable) plan.algo = result.algo;
  return plan;
}

// Runs g through cuBLASLt; false when Lt has no algorithm for it, or refuses the one its
// heuristic gave (nothing was queued: the caller runs g another way).
bool lt_gemm(const kernels::GemmArgs& g, cublasComputeType_t compute) {
  LtPlan& plan = lt_plan(g, compute);
  if (!plan.usable) return false;
  if (g.bias)
    TRI_CUBLAS_CHECK(cublas().cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof g.bias));
  if (g.pre_gelu)
    TRI_CUBLAS_CHECK(cublas().cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g.pre_gelu,
                                                    sizeof g.pre_gelu));
  const float alpha = static_cast<float>(g.alpha), beta = static_cast<float>(g.beta);
  const cublasStatus_t status = cublas().cublasLtMatmul(lt_handle(), plan.op, &alpha, g.b, plan.a, g.a, plan.b, &beta, g.c,
                                               plan.c, g.c, plan.c, &plan.algo, lt_workspace(), kLtWorkspaceBytes,
                                               nullptr);
  if (status == CUBLAS_STATUS_SUCCESS) return true;
  // A real failure (execution, memory) is an error, not a refusal.
  if (status != CUBLAS_STATUS_NOT_SUPPORTED && status != CUBLAS_STATUS_INVALID_VALUE) TRI_CUBLAS_CHECK(status);
  // A refusal checked before launch (an unsupported attribute combination): said once per
  // plan, and the problem goes to the fallback from now on.
  std::fprintf(stderr, "trident: cuBLASLt refused a %lldx%lldx%lld GEMM (%s%s): %s; using the fallback\n",
               static_cast<long long>(g.M), static_cast<long long>(g.N), static_cast<long long>(g.K),
               g.bias ? "bias" : "no bias", g.pre_gelu ? ", GELU" : "", cublas().cublasGetStatusName(status));
  plan.usable = false;
  return false;
}

// kernels.cuda_cublaslt (TRIDENT_CUDA_CUBLASLT=0) sends every GEMM to cublasGemmEx.
bool use_lt() { return kernel_switch(KernelSwitch::kCudaCublasLt); }

// kernels.cuda_gelu_epilogue = false (TRIDENT_CUDA_GELU_EPILOGUE=0) runs linear + GELU as a
// bias-epilogue GEMM and a separate GELU kernel, to measure what the fused epilogue saves.
bool use_gelu_epilogue() { return kernel_switch(KernelSwitch::kCudaGeluEpilogue); }

// cublasGemmEx / cublasGemmStridedBatchedEx: f64, and what cuBLASLt has no algorithm for.
void gemm_ex(const kernels::GemmArgs& g, cublasComputeType_t compute) {
  const bool f64 = g.dtype == DType::kF64;
  const cublasOperation_t op_a = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const double alpha_d = g.alpha, beta_d = g.beta;
  const float alpha_f = static_cast<float>(g.alpha), beta_f = static_cast<float>(g.beta);
  const void* alpha = f64 ? static_cast<const void*>(&alpha_d) : static_cast<const void*>(&alpha_f);
  const void* beta = f64 ? static_cast<const void*>(&beta_d) : static_cast<const void*>(&beta_f);
  const int M = static_cast<int>(g.M), N = static_cast<int>(g.N), K = static_cast<int>(g.K);
  // A K = 0 product is beta * C; cuBLAS handles it, but needs leading dims >= 1.
  const int lda = static_cast<int>(std::max<int64_t>(g.lda, 1)), ldb = static_cast<int>(std::max<int64_t>(g.ldb, 1)),
            ldc = static_cast<int>(std::max<int64_t>(g.ldc, 1));
  if (g.batch == 1) {
    TRI_CUBLAS_CHECK(cublas().cublasGemmEx(handle(), op_b, op_a, N, M, K, alpha, g.b, cuda_type(g.dtype), ldb, g.a,
                                  cuda_type(g.dtype), lda, beta, g.c, cuda_type(g.c_dtype), ldc, compute,
                                  CUBLAS_GEMM_DEFAULT));
  } else {
    TRI_CHECK(g.batch <= INT32_MAX, "gemm on cuda: batch ", g.batch, " exceeds cuBLAS's 32-bit count");
    TRI_CUBLAS_CHECK(cublas().cublasGemmStridedBatchedEx(handle(), op_b, op_a, N, M, K, alpha, g.b, cuda_type(g.dtype), ldb,
                                                g.stride_b, g.a, cuda_type(g.dtype), lda, g.stride_a, beta, g.c,
                                                cuda_type(g.c_dtype), ldc, g.stride_c, static_cast<int>(g.batch),
                                                compute, CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace

void set_allow_tf32(bool allow) { set_kernel_switch(KernelSwitch::kCudaTf32, allow); }
bool allow_tf32() { return kernel_switch(KernelSwitch::kCudaTf32); }

void gemm(const kernels::GemmArgs& g) {
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  TRI_CHECK(g.c_dtype == g.dtype || (g.c_dtype == DType::kF32 && (g.dtype == DType::kBF16 || g.dtype == DType::kF16)),
            "gemm on cuda: output dtype ", g.c_dtype, " for inputs of dtype ", g.dtype,
            " (expected the same, or f32 for bf16/f16)");
  TRI_CHECK(g.pre_gelu == nullptr || g.ld_pre_gelu >= g.N, "gemm on cuda: ld_pre_gelu ", g.ld_pre_gelu,
            " is less than the ", g.N, " columns of C");
  for (int64_t v : {g.M, g.N, g.K, g.lda, g.ldb, g.ldc, g.ld_pre_gelu})
    TRI_CHECK(v <= INT32_MAX, "gemm on cuda: size ", v, " exceeds cuBLAS's 32-bit dimensions");
  // cuBLAS is column-major: a row-major C (M, N) is a column-major C^T (N, M), and
  // C^T = op(B)^T op(A)^T, so the operands swap places and keep their own transposes.
  const bool f64 = g.dtype == DType::kF64;
  const cublasComputeType_t compute =
      f64 ? CUBLAS_COMPUTE_64F : (g.dtype == DType::kF32 && allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
  TRI_CHECK((g.bias == nullptr && g.pre_gelu == nullptr) || (g.batch == 1 && g.beta == 0.0),
            "gemm on cuda: a bias or GELU epilogue needs batch 1 and beta 0, got batch ", g.batch, ", beta ", g.beta);
  if (g.pre_gelu) {
    // cuBLASLt wants the GELU input's leading dim a multiple of 8.
    if (!f64 && g.K > 0 && use_lt() && use_gelu_epilogue() && g.ld_pre_gelu % 8 == 0 && lt_gemm(g, compute)) return;
    // Unfused: the product (with its bias) into pre_gelu, then the GELU kernel over it.
    TRI_CHECK(g.ldc == g.N && g.ld_pre_gelu == g.N, "gemm on cuda: an unfused GELU epilogue needs packed rows, got ",
              "ldc ", g.ldc, " and ld_pre_gelu ", g.ld_pre_gelu, " for ", g.N, " columns");
    kernels::GemmArgs product = g;
    product.c = g.pre_gelu;
    product.pre_gelu = nullptr;
    gemm(product);
    launch_unary(static_cast<int>(kernels::DeviceUnaryOp::kGeluTanh), static_cast<int>(g.c_dtype), g.c, g.pre_gelu,
                 0.0, g.M * g.N);
    TRI_CUDA_CHECK(cudaGetLastError());
    return;
  }
  if (!f64 && g.K > 0 && use_lt() && lt_gemm(g, compute)) return;
  kernels::GemmArgs plain = g;
  if (g.bias) {  // no fused epilogue for this problem: the bias in every row of C, then beta = 1
    const int64_t dst_strides[2] = {g.ldc, 1}, src_strides[2] = {0, 1}, shape[2] = {g.M, g.N};
    launch_copy_strided(g.c, static_cast<int>(g.c_dtype), dst_strides, g.bias, static_cast<int>(g.c_dtype), src_strides,
                        shape, 2);
    plain.beta = 1.0;
  }
  gemm_ex(plain, compute);
}

}  // namespace trident::cuda
