#include "ops/optim.h"

#include <algorithm>

#include "core/copy.h"
#include "core/parallel.h"
#include "kernels/cpu/binary.h"
#include "kernels/cpu/reduce.h"
#include "ops/dispatch.h"

namespace trident::ops {

namespace {

void check_adamw(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v) {
  TRI_CHECK(param.is_contiguous() && m.is_contiguous() && v.is_contiguous(), "adamw: the parameter (",
            param.is_contiguous() ? "contiguous" : "not contiguous", "), exp_avg (",
            m.is_contiguous() ? "contiguous" : "not contiguous", ") and exp_avg_sq (",
            v.is_contiguous() ? "contiguous" : "not contiguous", ") must be contiguous");
  TRI_CHECK(grad.shape() == param.shape() && m.shape() == param.shape() && v.shape() == param.shape(),
            "adamw: parameter ", param.shape(), ", gradient ", grad.shape(), ", exp_avg ", m.shape(), " and exp_avg_sq ",
            v.shape(), " must have the same shape");
  check_same_dtype(param, grad, "adamw");
  TRI_CHECK_TYPE(m.dtype() == DType::kF32 && v.dtype() == DType::kF32, "adamw: exp_avg (", m.dtype(),
                 ") and exp_avg_sq (", v.dtype(), ") must be f32");
  check_same_device(param, grad, "adamw");
  check_same_device(param, m, "adamw (exp_avg)");
  check_same_device(param, v, "adamw (exp_avg_sq)");
}

kernels::DeviceAdamWStep device_step(const kernels::cpu::AdamWStep& step) {
  return {step.lr, step.beta1, step.beta2, step.eps, step.weight_decay, step.step};
}

// Indices of `tensors` on a device, grouped by (device, dtype, tag(k)) in order of first
// appearance; each group keeps the tensors' order.
template <class Tag>
std::vector<std::vector<size_t>> device_groups(const std::vector<Tensor>& tensors, const Tag& tag) {
  std::vector<std::vector<size_t>> groups;
  for (size_t k = 0; k < tensors.size(); ++k) {
    if (!on_device(tensors[k])) continue;
    auto same = [&](const std::vector<size_t>& g) {
      return tensors[g[0]].device() == tensors[k].device() && tensors[g[0]].dtype() == tensors[k].dtype() &&
             tag(g[0]) == tag(k);
    };
    auto it = std::find_if(groups.begin(), groups.end(), same);
    if (it == groups.end()) groups.push_back({k});
    else it->push_back(k);
  }
  return groups;
}
std::vector<std::vector<size_t>> device_groups(const std::vector<Tensor>& tensors) {
  return device_groups(tensors, [](size_t) { return 0; });
}

// adamw_update_multi_, with `outs` (nullptr: none) each updated parameter also copied into
// outs[k]: by the update's launch where the device's kernel can (f32 into a contiguous bf16
// or f16 tensor on the same device), by core::copy_ after it elsewhere. The same bits.
void adamw_multi(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& ms,
                 const std::vector<Tensor>& vs, const std::vector<Tensor>* outs, const kernels::cpu::AdamWStep& step) {
  TRI_CHECK(grads.size() == params.size() && ms.size() == params.size() && vs.size() == params.size(),
            "adamw: ", params.size(), " parameters, ", grads.size(), " gradients, ", ms.size(), " exp_avg and ",
            vs.size(), " exp_avg_sq");
  TRI_CHECK(outs == nullptr || outs->size() == params.size(), "adamw: ", params.size(), " parameters and ",
            outs ? outs->size() : 0, " tensors to copy them into");
  // Every tensor is checked before any is updated: a bad argument leaves no half-taken step.
  for (size_t k = 0; k < params.size(); ++k) {
    check_adamw(params[k], grads[k], ms[k], vs[k]);
    if (outs)
      TRI_CHECK((*outs)[k].shape() == params[k].shape(), "adamw: parameter ", k, " of shape ", params[k].shape(),
                " copied into a tensor of shape ", (*outs)[k].shape());
  }
  // The device kernel writes outs[k] itself; otherwise it is a copy after the update. -1: no out.
  const auto fused_dtype = [&](size_t k) {
    if (outs == nullptr || !on_device(params[k])) return -1;
    const Tensor& o = (*outs)[k];
    const bool fused = params[k].dtype() == DType::kF32 && (o.dtype() == DType::kBF16 || o.dtype() == DType::kF16) &&
                       o.device() == params[k].device() && o.is_contiguous();
    return fused ? static_cast<int>(o.dtype()) : -1;
  };
  const auto copy_out = [&](size_t k) {
    if (outs == nullptr) return;
    if (fused_dtype(k) >= 0) (*outs)[k].bump_version();
    else core::copy_((*outs)[k], params[k]);
  };
  for (size_t k = 0; k < params.size(); ++k) {
    if (on_device(params[k])) continue;
    adamw_update_(params[k], grads[k], ms[k], vs[k], step);
    copy_out(k);
  }
  for (const std::vector<size_t>& group : device_groups(params, fused_dtype)) {
    std::vector<Tensor> g;  // contiguous gradients, alive until the launch is queued
    std::vector<void*> p, o;
    std::vector<const void*> gp;
    std::vector<float*> m, v;
    std::vector<int64_t> n;
    for (size_t k : group) {
      g.push_back(core::contiguous(grads[k]));
      p.push_back(params[k].raw_data());
      gp.push_back(g.back().raw_data());
      m.push_back(ms[k].data_ptr<float>());
      v.push_back(vs[k].data_ptr<float>());
      n.push_back(params[k].numel());
      if (fused_dtype(k) >= 0) o.push_back((*outs)[k].raw_data());
    }
    const Tensor& first = params[group[0]];
    const DType out_dtype = o.empty() ? DType::kF32 : (*outs)[group[0]].dtype();
    device_kernels_of(first).adamw_update_multi(first.dtype(), p.data(), gp.data(), m.data(), v.data(),
                                                o.empty() ? nullptr : o.data(), out_dtype, n.data(),
                                                static_cast<int64_t>(group.size()), device_step(step));
    for (size_t k : group) {
      params[k].bump_version();
      ms[k].bump_version();
      vs[k].bump_version();
      copy_out(k);
    }
  }
}

}  // namespace

void adamw_update_(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                   const kernels::cpu::AdamWStep& step) {
  check_adamw(param, grad, m, v);
  const Tensor g = core::contiguous(grad);
  if (on_device(param)) {
    device_kernels_of(param).adamw_update(param.dtype(), param.raw_data(), g.raw_data(), m.data_ptr<float>(),
                                          v.data_ptr<float>(), param.numel(), device_step(step));
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

void adamw_update_multi_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                         const std::vector<Tensor>& ms, const std::vector<Tensor>& vs,
                         const kernels::cpu::AdamWStep& step) {
  adamw_multi(params, grads, ms, vs, nullptr, step);
}

void adamw_update_multi_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                         const std::vector<Tensor>& ms, const std::vector<Tensor>& vs,
                         const kernels::cpu::AdamWStep& step, const std::vector<Tensor>& outs) {
  adamw_multi(params, grads, ms, vs, &outs, step);
}

double sum_of_squares(const std::vector<Tensor>& tensors) {
  double total = 0.0;
  for (const Tensor& t0 : tensors) {
    if (on_device(t0)) continue;
    const Tensor t = core::contiguous(t0);
    dispatch_floating(t.dtype(), "sum_of_squares", [&]<class T>() {
      total += kernels::cpu::sum_of_squares<T>(t.data_ptr<T>(), t.numel());
    });
  }
  // Device tensors: one launch and one synchronization per (device, dtype).
  for (const std::vector<size_t>& group : device_groups(tensors)) {
    std::vector<Tensor> c;
    std::vector<const void*> x;
    std::vector<int64_t> n;
    for (size_t k : group) {
      c.push_back(core::contiguous(tensors[k]));
      x.push_back(c.back().raw_data());
      n.push_back(c.back().numel());
    }
    total += device_kernels_of(c[0]).sum_of_squares_multi(c[0].dtype(), x.data(), n.data(),
                                                          static_cast<int64_t>(group.size()));
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
