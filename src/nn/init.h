// Parameter initialization. Runs without recording autograd history and draws from a
// Generator, so a model's initial weights depend only on the seed.
#pragma once

#include "core/rng.h"
#include "core/tensor.h"

namespace trident::nn {

void init_normal_(const Tensor& t, Generator& gen, double mean, double stddev);
void init_constant_(const Tensor& t, double value);

}  // namespace trident::nn
