// cuBLAS and cuBLASLt, opened on the first GPU product instead of linked.
//
// Note [cuBLAS loaded on first use]
// Linked, libcublasLt (540 MB) runs its static constructors in every process that links the
// CUDA backend, whether or not it ever touches a GPU: 0.4-0.5 s of CPU at each start (perf: 42-48%
// of an empty test run's samples in libcublasLt, most of the rest the page faults it causes).
// The test suite starts ~2,900 processes (a ctest test per GoogleTest case), so on a CPU-only CI
// machine that was most of the test phase. PyTorch and the CUDA runtime itself load their
// libraries lazily for the same reason. So the backend calls cuBLAS through this table, which
// dlopen()s the libraries the first time a product runs on a GPU; a CPU-only process never loads
// them. The functions are the headers' own declarations (decltype), so a signature change in a
// new toolkit fails to compile rather than to run.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

namespace trident::cuda {

// The C API's products: C++ also sees overloads taking a cudaDataType compute type (inline
// shims over these), so the exported ones are picked by their signatures.
using CublasGemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                        const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                                        const void*, void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
using CublasGemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                                      int, const void*, const void*, cudaDataType, int, long long,
                                                      const void*, cudaDataType, int, long long, const void*, void*,
                                                      cudaDataType, int, long long, int, cublasComputeType_t,
                                                      cublasGemmAlgo_t);

struct CublasLibrary {
  // cublas_v2.h maps some names to their _v2 symbols by macro; the members follow it, so
  // `cublas().cublasCreate(...)` calls cublasCreate_v2 as a direct call would.
  decltype(&::cublasCreate) cublasCreate;
  decltype(&::cublasSetMathMode) cublasSetMathMode;
  decltype(static_cast<CublasGemmEx>(&::cublasGemmEx)) cublasGemmEx;
  decltype(static_cast<CublasGemmStridedBatchedEx>(&::cublasGemmStridedBatchedEx)) cublasGemmStridedBatchedEx;
  decltype(&::cublasGetStatusName) cublasGetStatusName;
  decltype(&::cublasGetStatusString) cublasGetStatusString;
  decltype(&::cublasLtCreate) cublasLtCreate;
  decltype(&::cublasLtMatmulDescCreate) cublasLtMatmulDescCreate;
  decltype(&::cublasLtMatmulDescSetAttribute) cublasLtMatmulDescSetAttribute;
  decltype(&::cublasLtMatrixLayoutCreate) cublasLtMatrixLayoutCreate;
  decltype(&::cublasLtMatrixLayoutSetAttribute) cublasLtMatrixLayoutSetAttribute;
  decltype(&::cublasLtMatmulPreferenceCreate) cublasLtMatmulPreferenceCreate;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) cublasLtMatmulPreferenceSetAttribute;
  decltype(&::cublasLtMatmulPreferenceDestroy) cublasLtMatmulPreferenceDestroy;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) cublasLtMatmulAlgoGetHeuristic;
  decltype(&::cublasLtMatmul) cublasLtMatmul;
};

// The libraries, opened and resolved on the first call (thread-safe); throws naming the library,
// the paths tried and dlerror()'s reason when one cannot be opened or lacks a function.
const CublasLibrary& cublas();

}  // namespace trident::cuda
