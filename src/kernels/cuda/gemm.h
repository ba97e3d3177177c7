// Matrix products on the GPU through cuBLAS (kernels::GemmArgs: row-major, optional
// transposes, strided batches, fp32 accumulation for bf16/f16). fp32 runs in full fp32 unless
// TF32 is allowed (set_allow_tf32, or TRIDENT_CUDA_TF32=1 in the environment), as PyTorch's
// torch.backends.cuda.matmul.allow_tf32.
#pragma once

#include "kernels/device/device_kernels.h"

namespace trident::cuda {

void gemm(const kernels::GemmArgs& args);
void set_allow_tf32(bool allow);
bool allow_tf32();

}  // namespace trident::cuda
