// Global gradient-norm clipping (torch.nn.utils.clip_grad_norm_): the L2 norm over every
// gradient; if above max_norm, all gradients are scaled by max_norm / (norm + 1e-6).
#pragma once

#include <vector>

#include "core/tensor.h"

namespace trident::optim {

// Returns the norm before clipping. max_norm <= 0 only measures.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm);

}  // namespace trident::optim
