// AdamW update of one parameter in place, with the arithmetic of kernels/cpu/adamw.h
// (torch.optim.AdamW): param/grad of `dtype`, m/v float state.
#pragma once

#include <cstdint>

namespace trident::cuda {

struct AdamWHyper {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;
};

void launch_adamw(int dtype, void* param, const void* grad, float* m, float* v, int64_t n, const AdamWHyper& h);

}  // namespace trident::cuda
