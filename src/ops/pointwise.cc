#include "ops/pointwise.h"

#include "core/copy.h"
#include "core/factory.h"
#include "kernels/cpu/pointwise.h"
#include "ops/dispatch.h"

namespace trident::ops {
namespace {

namespace cpu = kernels::cpu;

// out = kernel(out, x, n) on a contiguous copy of x (or x itself); kernel is a generic
// lambda called with typed pointers.
template <class Kernel>
Tensor unary(const Tensor& x_in, const char* what, kernels::DeviceUnaryOp op, double param, const Kernel& kernel) {
  check_floating(x_in, what);
  const Tensor x = core::contiguous(x_in);
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  if (on_device(x)) {
    device_kernels_of(x).unary(op, x.dtype(), out.raw_data(), x.raw_data(), param, x.numel());
    return out;
  }
  dispatch_floating(x.dtype(), what,
                    [&]<class T>() { kernel(out.data_ptr<T>(), x.data_ptr<T>(), x.numel()); });
  return out;
}

// dx = kernel(dx, grad, saved, n); `saved` is the forward's input or output, named by
// `saved_name` in errors.
template <class Kernel>
Tensor backward(const Tensor& grad_in, const Tensor& saved_in, const char* what,
                const char* saved_name, kernels::DeviceUnaryOp op, double param, const Kernel& kernel) {
  check_floating(saved_in, what);
  TRI_CHECK_TYPE(grad_in.dtype() == saved_in.dtype(), what, ": grad dtype ", grad_in.dtype(),
                 " does not match ", saved_name, " dtype ", saved_in.dtype());
  TRI_CHECK(grad_in.shape() == saved_in.shape(), what, ": grad shape ", grad_in.shape(),
            " does not match ", saved_name, " shape ", saved_in.shape());
  check_same_device(grad_in, saved_in, what);
  const Tensor grad = core::contiguous(grad_in), saved = core::contiguous(saved_in);
  Tensor dx = empty(saved.shape(), saved.dtype(), saved.device());
  if (on_device(saved)) {
    device_kernels_of(saved).unary_backward(op, saved.dtype(), dx.raw_data(), grad.raw_data(), saved.raw_data(), param,
                                            saved.numel());
    return dx;
  }
  dispatch_floating(saved.dtype(), what, [&]<class T>() {
    kernel(dx.data_ptr<T>(), grad.data_ptr<T>(), saved.data_ptr<T>(), saved.numel());
  });
  return dx;
}

}  // namespace

Tensor exp(const Tensor& x) {
  return unary(x, "exp", kernels::DeviceUnaryOp::kExp, 0.0,
               [](auto* out, const auto* in, int64_t n) { cpu::exp_forward(out, in, n); });
}
Tensor log(const Tensor& x) {
  return unary(x, "log", kernels::DeviceUnaryOp::kLog, 0.0,
               [](auto* out, const auto* in, int64_t n) { cpu::log_forward(out, in, n); });
}
Tensor tanh(const Tensor& x) {
  return unary(x, "tanh", kernels::DeviceUnaryOp::kTanh, 0.0,
               [](auto* out, const auto* in, int64_t n) { cpu::tanh_forward(out, in, n); });
}
Tensor sqrt(const Tensor& x) {
  return unary(x, "sqrt", kernels::DeviceUnaryOp::kSqrt, 0.0,
               [](auto* out, const auto* in, int64_t n) { cpu::sqrt_forward(out, in, n); });
}
Tensor pow(const Tensor& x, double exponent) {
  return unary(x, "pow", kernels::DeviceUnaryOp::kPow, exponent, [exponent](auto* out, const auto* in, int64_t n) {
    cpu::pow_forward(out, in, exponent, n);
  });
}
Tensor gelu_tanh(const Tensor& x) {
  return unary(x, "gelu_tanh", kernels::DeviceUnaryOp::kGeluTanh, 0.0,
               [](auto* out, const auto* in, int64_t n) { cpu::gelu_tanh_forward(out, in, n); });
}
Tensor gelu(const Tensor& x) {
  return unary(x, "gelu", kernels::DeviceUnaryOp::kGelu, 0.0,
               [](auto* out, const auto* in, int64_t n) { cpu::gelu_forward(out, in, n); });
}
Tensor silu(const Tensor& x) {
  return unary(x, "silu", kernels::DeviceUnaryOp::kSilu, 0.0,
               [](auto* out, const auto* in, int64_t n) { cpu::silu_forward(out, in, n); });
}

Tensor exp_backward(const Tensor& grad, const Tensor& out) {
  return backward(
      grad, out, "exp_backward", "output", kernels::DeviceUnaryOp::kExp, 0.0,
      [](auto* dx, const auto* dy, const auto* y, int64_t n) { cpu::exp_backward(dx, dy, y, n); });
}
Tensor log_backward(const Tensor& grad, const Tensor& x) {
  return backward(grad, x, "log_backward", "input", kernels::DeviceUnaryOp::kLog, 0.0,
                  [](auto* dx, const auto* dy, const auto* in, int64_t n) {
                    cpu::log_backward(dx, dy, in, n);
                  });
}
Tensor tanh_backward(const Tensor& grad, const Tensor& out) {
  return backward(
      grad, out, "tanh_backward", "output", kernels::DeviceUnaryOp::kTanh, 0.0,
      [](auto* dx, const auto* dy, const auto* y, int64_t n) { cpu::tanh_backward(dx, dy, y, n); });
}
Tensor sqrt_backward(const Tensor& grad, const Tensor& out) {
  return backward(
      grad, out, "sqrt_backward", "output", kernels::DeviceUnaryOp::kSqrt, 0.0,
      [](auto* dx, const auto* dy, const auto* y, int64_t n) { cpu::sqrt_backward(dx, dy, y, n); });
}
Tensor pow_backward(const Tensor& grad, const Tensor& x, double exponent) {
  return backward(grad, x, "pow_backward", "input", kernels::DeviceUnaryOp::kPow, exponent,
                  [exponent](auto* dx, const auto* dy, const auto* in, int64_t n) {
                    cpu::pow_backward(dx, dy, in, exponent, n);
                  });
}
Tensor gelu_tanh_backward(const Tensor& grad, const Tensor& x) {
  return backward(grad, x, "gelu_tanh_backward", "input", kernels::DeviceUnaryOp::kGeluTanh, 0.0,
                  [](auto* dx, const auto* dy, const auto* in, int64_t n) {
                    cpu::gelu_tanh_backward(dx, dy, in, n);
                  });
}
Tensor gelu_backward(const Tensor& grad, const Tensor& x) {
  return backward(grad, x, "gelu_backward", "input", kernels::DeviceUnaryOp::kGelu, 0.0,
                  [](auto* dx, const auto* dy, const auto* in, int64_t n) {
                    cpu::gelu_backward(dx, dy, in, n);
                  });
}
Tensor silu_backward(const Tensor& grad, const Tensor& x) {
  return backward(grad, x, "silu_backward", "input", kernels::DeviceUnaryOp::kSilu, 0.0,
                  [](auto* dx, const auto* dy, const auto* in, int64_t n) {
                    cpu::silu_backward(dx, dy, in, n);
                  });
}

}  // namespace trident::ops
