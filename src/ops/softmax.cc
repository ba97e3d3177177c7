#include "ops/softmax.h"

#include "core/copy.h"
#include "core/factory.h"
#include "kernels/cpu/softmax.h"
#include "ops/dispatch.h"

namespace trident::ops {
namespace {

namespace cpu = kernels::cpu;

// A contiguous tensor seen as (outer, n, inner) around the softmax dim.
struct Axis {
  int64_t outer = 1, n = 1, inner = 1;
};

Axis axis_of(const Shape& shape, int64_t dim, const char* what) {
  const int d = normalize_dim(dim, shape.size(), what);
  Axis a;
  if (shape.size() == 0) return a;
  for (int i = 0; i < d; ++i) a.outer *= shape[i];
  a.n = shape[d];
  for (int i = d + 1; i < shape.size(); ++i) a.inner *= shape[i];
  return a;
}

template <class Kernel>
Tensor forward(const Tensor& x_in, int64_t dim, const char* what, bool log, const Kernel& kernel) {
  check_floating(x_in, what);
  const Axis a = axis_of(x_in.shape(), dim, what);
  const Tensor x = core::contiguous(x_in);
  Tensor y = empty(x.shape(), x.dtype(), x.device());
  if (on_device(x)) {
    device_kernels_of(x).softmax(log, x.dtype(), y.raw_data(), x.raw_data(), a.outer, a.n, a.inner);
    return y;
  }
  dispatch_floating(x.dtype(), what, [&]<class T>() {
    kernel(y.data_ptr<T>(), x.data_ptr<T>(), a.outer, a.n, a.inner);
  });
  return y;
}

template <class Kernel>
Tensor backward(const Tensor& grad_in, const Tensor& out_in, int64_t dim, const char* what, bool log,
                const Kernel& kernel) {
  check_floating(out_in, what);
  TRI_CHECK_TYPE(grad_in.dtype() == out_in.dtype(), what, ": grad dtype ", grad_in.dtype(),
                 " does not match output dtype ", out_in.dtype());
  TRI_CHECK(grad_in.shape() == out_in.shape(), what, ": grad shape ", grad_in.shape(),
            " does not match output shape ", out_in.shape());
  check_same_device(grad_in, out_in, what);
  const Axis a = axis_of(out_in.shape(), dim, what);
  const Tensor grad = core::contiguous(grad_in), out = core::contiguous(out_in);
  Tensor dx = empty(out.shape(), out.dtype(), out.device());
  if (on_device(out)) {
    device_kernels_of(out).softmax_backward(log, out.dtype(), dx.raw_data(), grad.raw_data(), out.raw_data(), a.outer,
                                            a.n, a.inner);
    return dx;
  }
  dispatch_floating(out.dtype(), what, [&]<class T>() {
    kernel(dx.data_ptr<T>(), grad.data_ptr<T>(), out.data_ptr<T>(), a.outer, a.n, a.inner);
  });
  return dx;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  return forward(x, dim, "softmax", false,
                 [](auto* y, const auto* in, int64_t outer, int64_t n, int64_t inner) {
                   cpu::softmax_forward(y, in, outer, n, inner);
                 });
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  return forward(x, dim, "log_softmax", true,
                 [](auto* y, const auto* in, int64_t outer, int64_t n, int64_t inner) {
                   cpu::log_softmax_forward(y, in, outer, n, inner);
                 });
}

Tensor softmax_backward(const Tensor& grad, const Tensor& out, int64_t dim) {
  return backward(grad, out, dim, "softmax_backward", false,
                  [](auto* dx, const auto* dy, const auto* y, int64_t outer, int64_t n,
                     int64_t inner) { cpu::softmax_backward(dx, dy, y, outer, n, inner); });
}

Tensor log_softmax_backward(const Tensor& grad, const Tensor& out, int64_t dim) {
  return backward(grad, out, dim, "log_softmax_backward", true,
                  [](auto* dx, const auto* dy, const auto* y, int64_t outer, int64_t n,
                     int64_t inner) { cpu::log_softmax_backward(dx, dy, y, outer, n, inner); });
}

}  // namespace trident::ops
