#include "ops/dropout.h"

#include "core/factory.h"
#include "kernels/cpu/dropout.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"

namespace trident::ops {
namespace {

Tensor apply_mask(const Tensor& x_in, double p, uint64_t seed, uint64_t offset, const char* what) {
  check_floating(x_in, what);
  check_dropout_probability(p, what);
  if (p == 1.0) return ops::mul_scalar(x_in, 0.0);  // every element dropped: no mask to draw
  const Tensor x = core::contiguous(x_in);
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  if (on_device(x)) {
    device_kernels_of(x).dropout(x.dtype(), out.raw_data(), x.raw_data(), x.numel(), p, seed, offset);
    return out;
  }
  dispatch_floating(x.dtype(), what, [&]<class T>() {
    kernels::cpu::dropout_forward<T>(out.data_ptr<T>(), x.data_ptr<T>(), x.numel(), p, seed,
                                     offset);
  });
  return out;
}

}  // namespace

void check_dropout_probability(double p, const char* what) {
  TRI_CHECK(p >= 0.0 && p <= 1.0, what, ": dropout probability p must be in [0, 1], got ", p);
}

int64_t dropout_counters(int64_t numel) {
  return kernels::cpu::dropout_counters(numel);
}

Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  return apply_mask(x, p, seed, offset, "dropout");
}

Tensor dropout_backward(const Tensor& grad_out, double p, uint64_t seed, uint64_t offset) {
  // d out[i] / d x[i] is the multiplier mask[i] / (1 - p): the same map on the gradient.
  return apply_mask(grad_out, p, seed, offset, "dropout_backward");
}

}  // namespace trident::ops
