#include "nn/init.h"

#include "core/factory.h"

namespace trident::nn {

void init_normal_(const Tensor& t, Generator& gen, double mean, double stddev) {
  normal_(t, gen, mean, stddev);
}

void init_constant_(const Tensor& t, double value) { fill_(t, value); }

}  // namespace trident::nn
