// TRI_CUDA_CHECK(call): a CUDA runtime call that must succeed; otherwise throws naming the
// call and CUDA's error (name and description).
#pragma once

#include <cuda_runtime.h>

#include "core/check.h"

#define TRI_CUDA_CHECK(call)                                                                              \
  do {                                                                                                    \
    const cudaError_t tri_cuda_err_ = (call);                                                             \
    TRI_CHECK(tri_cuda_err_ == cudaSuccess, "CUDA error ", cudaGetErrorName(tri_cuda_err_), " (",          \
              cudaGetErrorString(tri_cuda_err_), ") in ", #call);                                          \
  } while (0)
