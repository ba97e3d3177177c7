// Matrix products on the GPU (kernels::GemmArgs: row-major, optional transposes, strided
// batches, fp32 accumulation for bf16/f16, an optional bias epilogue) through cuBLASLt, with
// the heuristic's algorithm cached per problem; f64, and problems cuBLASLt has no algorithm
// for, go to cublasGemmEx (TRIDENT_CUDA_CUBLASLT=0 sends everything there). Split-K partial
// sums stay in fp32. fp32 runs in full fp32 unless TF32 is allowed (set_allow_tf32, or
// TRIDENT_CUDA_TF32=1 in the environment), as PyTorch's torch.backends.cuda.matmul.allow_tf32.
#pragma once

#include "kernels/device/device_kernels.h"

namespace trident::cuda {

void gemm(const kernels::GemmArgs& args);
void set_allow_tf32(bool allow);
bool allow_tf32();

}  // namespace trident::cuda
