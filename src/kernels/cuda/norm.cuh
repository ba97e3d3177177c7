// LayerNorm and RMSNorm over the last dim of contiguous (N, C) rows: the contract of
// kernels/cpu/layernorm.h and rmsnorm.h. Statistics (mean, rstd) are acc_t (float, double for
// f64); weight/bias may be null (ones/zeros); a null gradient output is not computed. `=` for all.
#pragma once

#include <cstdint>

namespace trident::cuda {

void launch_layernorm_forward(int dtype, void* out, void* mean, void* rstd, const void* x, const void* weight,
                              const void* bias, int64_t N, int64_t C, double eps);
void launch_layernorm_backward(int dtype, void* dx, void* dweight, void* dbias, const void* dout, const void* x,
                               const void* weight, const void* mean, const void* rstd, int64_t N, int64_t C);
void launch_rmsnorm_forward(int dtype, void* out, void* rstd, const void* x, const void* weight, int64_t N,
                            int64_t C, double eps);
void launch_rmsnorm_backward(int dtype, void* dx, void* dweight, const void* dout, const void* x,
                             const void* weight, const void* rstd, int64_t N, int64_t C);

}  // namespace trident::cuda
