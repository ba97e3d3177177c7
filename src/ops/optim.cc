#include "ops/optim.h"

#include "core/copy.h"
#include "core/parallel.h"
#include "kernels/cpu/binary.h"
#include "ops/dispatch.h"

namespace trident::ops {

void adamw_update_(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                   const kernels::cpu::AdamWStep& step) {
  TRI_CHECK(param.is_contiguous() && m.is_contiguous() && v.is_contiguous(),
            "adamw: parameter and state must be contiguous");
  TRI_CHECK(grad.shape() == param.shape() && m.shape() == param.shape() && v.shape() == param.shape(),
            "adamw: parameter ", param.shape(), ", gradient ", grad.shape(), " and state ", m.shape(),
            " must have the same shape");
  check_same_dtype(param, grad, "adamw");
  TRI_CHECK_TYPE(m.dtype() == DType::kF32 && v.dtype() == DType::kF32, "adamw: state must be f32");
  check_same_device(param, grad, "adamw");
  check_same_device(param, m, "adamw (exp_avg)");
  check_same_device(param, v, "adamw (exp_avg_sq)");
  const Tensor g = core::contiguous(grad);
  if (on_device(param)) {
    device_kernels_of(param).adamw_update(
        param.dtype(), param.raw_data(), g.raw_data(), m.data_ptr<float>(), v.data_ptr<float>(), param.numel(),
        kernels::DeviceAdamWStep{step.lr, step.beta1, step.beta2, step.eps, step.weight_decay, step.step});
  } else {
    dispatch_floating(param.dtype(), "adamw", [&]<class T>() {
      kernels::cpu::adamw_update<T>(param.data_ptr<T>(), g.data_ptr<T>(), m.data_ptr<float>(),
                                    v.data_ptr<float>(), param.numel(), step);
    });
  }
  param.bump_version();
  m.bump_version();
  v.bump_version();
}

double sum_of_squares(const std::vector<Tensor>& tensors) {
  double total = 0.0;
  for (const Tensor& t0 : tensors) {
    const Tensor t = core::contiguous(t0);
    if (on_device(t)) {
      total += device_kernels_of(t).sum_of_squares(t.dtype(), t.raw_data(), t.numel());
      continue;
    }
    dispatch_floating(t.dtype(), "sum_of_squares", [&]<class T>() {
      const T* p = t.data_ptr<T>();
      total += parallel_reduce<double>(t.numel(), 32768, 0.0, [&](int64_t b, int64_t e) {
        double s = 0.0;
        for (int64_t i = b; i < e; ++i) {
          const double x = static_cast<double>(p[i]);
          s += x * x;
        }
        return s;
      });
    });
  }
  return total;
}

void scale_(const Tensor& t, double scale) {
  TRI_CHECK(t.is_contiguous(), "scale_: tensor must be contiguous");
  if (on_device(t)) {
    device_kernels_of(t).scale_shift(t.dtype(), t.raw_data(), t.raw_data(), scale, 0.0, t.numel());
  } else {
    dispatch_floating(t.dtype(), "scale_", [&]<class T>() {
      kernels::cpu::scale_shift<T>(t.data_ptr<T>(), t.data_ptr<T>(), scale, 0.0, t.numel());
    });
  }
  t.bump_version();
}

}  // namespace trident::ops
