// SwiGLU front end (see ops/swiglu.h): validation, contiguous inputs, dispatch.
#include "ops/swiglu.h"

#include "core/copy.h"
#include "core/factory.h"
#include "kernels/cpu/swiglu.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/pointwise.h"

namespace trident::ops {
namespace {

void check_pair(const Tensor& a, const char* a_name, const Tensor& b, const char* b_name, const char* what) {
  check_floating(a, what);
  check_same_dtype(a, b, what);
  check_same_device(a, b, what);
  TRI_CHECK(a.shape() == b.shape(), what, ": ", a_name, " ", a.shape(), " and ", b_name, " ", b.shape(),
            " must have the same shape");
}

}  // namespace

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  const char* what = "swiglu";
  check_pair(gate, "gate", up, "up", what);
  if (on_device(gate)) return mul(silu(gate), up);
  const Tensor g = core::contiguous(gate), u = core::contiguous(up);
  Tensor h = empty(g.shape(), g.dtype(), g.device());
  dispatch_floating(g.dtype(), what, [&]<class T>() {
    kernels::cpu::swiglu_forward<T>(h.data_ptr<T>(), g.data_ptr<T>(), u.data_ptr<T>(), g.numel());
  });
  return h;
}

std::pair<Tensor, Tensor> swiglu_backward(const Tensor& dh, const Tensor& gate, const Tensor& up) {
  const char* what = "swiglu_backward";
  check_pair(gate, "gate", up, "up", what);
  check_pair(dh, "grad", gate, "gate", what);
  if (on_device(gate)) return {silu_backward(mul(dh, up), gate), mul(dh, silu(gate))};
  const Tensor d = core::contiguous(dh), g = core::contiguous(gate), u = core::contiguous(up);
  Tensor dg = empty(g.shape(), g.dtype(), g.device()), du = empty(g.shape(), g.dtype(), g.device());
  dispatch_floating(g.dtype(), what, [&]<class T>() {
    kernels::cpu::swiglu_backward<T>(dg.data_ptr<T>(), du.data_ptr<T>(), d.data_ptr<T>(), g.data_ptr<T>(),
                                     u.data_ptr<T>(), g.numel());
  });
  return {dg, du};
}

}  // namespace trident::ops
