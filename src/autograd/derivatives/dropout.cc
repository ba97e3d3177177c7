// Differentiable dropout: reserves the mask's Philox counters from the Generator, and
// records only (p, seed, offset) for backward, which regenerates the mask.
#include "autograd/functions/dropout.h"

#include "autograd/record.h"
#include "ops/dropout.h"

namespace trident {
using namespace autograd;

TRI_REGISTER_OP(kDropout, "dropout");

Tensor dropout(const Tensor& x, double p, Generator& gen, bool training) {
  TRI_PROFILE_OP(kDropout);
  ops::check_dropout_probability(p, "dropout");
  check_floating(x, "dropout");
  if (!training || p == 0.0) {
    Tensor out = detach(x);  // a fresh alias: an op's output is never its input
    if (needs_grad({x}))
      record(kDropout, {x}, {out}, [](const BackwardContext& c) {
        // out = x:  dx = d out
        return GradList{c.grad()};
      });
    return out;
  }
  const uint64_t seed = gen.seed();
  const uint64_t offset =
      p == 1.0 ? 0 : gen.reserve(static_cast<uint64_t>(ops::dropout_counters(x.numel())));
  Tensor out = ops::dropout(x, p, seed, offset);
  if (needs_grad({x}))
    record(kDropout, {x}, {out}, [p, seed, offset](const BackwardContext& c) {
      // out = x * m, m = mask / (1 - p):  dx = d out * m  (mask regenerated from seed, offset)
      return GradList{ops::dropout_backward(c.grad(), p, seed, offset)};
    });
  return out;
}

}  // namespace trident
