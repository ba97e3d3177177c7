#include "optim/clip_grad.h"

#include <cmath>

#include "core/profiler.h"
#include "ops/optim.h"

namespace trident::optim {

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  profiler::ProfileScope scope("clip_grad_norm", profiler::Phase::kOptimizer);
  std::vector<Tensor> grads;
  for (const Tensor& p : params)
    if (p.grad().has_value()) grads.push_back(*p.grad());
  const double norm = std::sqrt(ops::sum_of_squares(grads));
  if (max_norm > 0.0) {
    const double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0)
      for (const Tensor& g : grads) ops::scale_(g, coef);
  }
  return norm;
}

}  // namespace trident::optim
