// Normalization front ends (see ops/norm.h): validation, contiguous inputs, allocation of
// outputs and statistics, dtype dispatch to kernels/cpu/{layernorm,rmsnorm}.
#include "ops/norm.h"

#include <cmath>
#include <string>

#include "core/factory.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/rmsnorm.h"
#include "ops/dispatch.h"

namespace trident::ops {
namespace {

// Checks x (..., C) with C >= 1; returns C.
int64_t check_input(const Tensor& x, const char* what) {
  check_floating(x, what);
  TRI_CHECK(x.dim() >= 1, what, ": expected an input of shape (..., C), got a 0-dim tensor");
  TRI_CHECK(x.size(-1) > 0, what, ": the normalized (last) dim of input ", x.shape(), " is empty");
  return x.size(-1);
}

// Checks an optional per-feature parameter (C) against x (..., C).
void check_param(const std::optional<Tensor>& p, const Tensor& x, const char* what,
                 const char* name) {
  if (!p) return;
  const std::string labelled = std::string(what) + " (" + name + ")";
  check_same_dtype(x, *p, labelled.c_str());
  check_same_device(x, *p, labelled.c_str());
  TRI_CHECK(p->dim() == 1 && p->size(0) == x.size(-1), what, ": ", name, " must have shape (",
            x.size(-1), ") to match the last dim of input ", x.shape(), ", got ", p->shape());
}

void check_eps(double eps, const char* what) {
  TRI_CHECK(std::isfinite(eps) && eps >= 0.0, what, ": eps must be finite and >= 0, got ", eps);
}

// x's shape without its last dim: the shape of the per-row statistics.
Shape row_shape(const Tensor& x) {
  Shape s = x.shape();
  s.resize(s.size() - 1);
  return s;
}

DType acc_dtype(DType dtype) {
  DType acc = DType::kF32;
  dispatch_floating(dtype, "acc_dtype", [&]<class T>() { acc = dtype_of<acc_t<T>>(); });
  return acc;
}

// Checks a statistic saved by the forward (mean or rstd) against x.
void check_statistic(const Tensor& stat, const Tensor& x, const char* what, const char* name) {
  const Shape rows = row_shape(x);
  const DType acc = acc_dtype(x.dtype());
  TRI_CHECK(stat.shape() == rows && stat.dtype() == acc, what, ": ", name,
            " must be the forward's statistic of shape ", rows, " and dtype ", acc, " for input ",
            x.shape(), " of dtype ", x.dtype(), ", got ", stat.shape(), " ", stat.dtype());
  check_same_device(x, stat, what);
}

void check_output_grad(const Tensor& dout, const Tensor& x, const char* what) {
  check_same_dtype(x, dout, what);
  check_same_device(x, dout, what);
  TRI_CHECK(dout.shape() == x.shape(), what, ": output gradient of shape ", dout.shape(),
            " does not match the input shape ", x.shape());
}

std::optional<Tensor> contiguous_or_none(const std::optional<Tensor>& t) {
  if (!t) return std::nullopt;
  return core::contiguous(*t);
}

template <class T>
T* data_or_null(const std::optional<Tensor>& t) {
  return t ? t->data_ptr<T>() : nullptr;
}

void* raw_or_null(const std::optional<Tensor>& t) { return t ? t->raw_data() : nullptr; }

}  // namespace

LayerNormOutput layernorm(const Tensor& x, const std::optional<Tensor>& weight,
                          const std::optional<Tensor>& bias, double eps) {
  const char* what = "layernorm";
  const int64_t C = check_input(x, what);
  check_param(weight, x, what, "weight");
  check_param(bias, x, what, "bias");
  check_eps(eps, what);
  const Tensor xc = core::contiguous(x);
  const std::optional<Tensor> w = contiguous_or_none(weight), b = contiguous_or_none(bias);
  const DType acc = acc_dtype(x.dtype());
  LayerNormOutput r{empty(x.shape(), x.dtype(), x.device()), empty(row_shape(x), acc, x.device()),
                    empty(row_shape(x), acc, x.device())};
  if (on_device(xc)) {
    device_kernels_of(xc).layernorm_forward(x.dtype(), r.out.raw_data(), r.mean.raw_data(), r.rstd.raw_data(),
                                            xc.raw_data(), w ? w->raw_data() : nullptr, b ? b->raw_data() : nullptr,
                                            x.numel() / C, C, eps);
    return r;
  }
  dispatch_floating(x.dtype(), what, [&]<class T>() {
    kernels::cpu::layernorm_forward<T>(
        r.out.data_ptr<T>(), r.mean.data_ptr<acc_t<T>>(), r.rstd.data_ptr<acc_t<T>>(),
        xc.data_ptr<T>(), data_or_null<T>(w), data_or_null<T>(b), x.numel() / C, C, eps);
  });
  return r;
}

LayerNormGrads layernorm_backward(const Tensor& dout, const Tensor& x,
                                  const std::optional<Tensor>& weight, const Tensor& mean,
                                  const Tensor& rstd, bool need_dx, bool need_dweight,
                                  bool need_dbias) {
  const char* what = "layernorm_backward";
  const int64_t C = check_input(x, what);
  check_param(weight, x, what, "weight");
  check_output_grad(dout, x, what);
  check_statistic(mean, x, what, "mean");
  check_statistic(rstd, x, what, "rstd");
  LayerNormGrads g;
  if (need_dx) g.dx = empty(x.shape(), x.dtype(), x.device());
  if (need_dweight) g.dweight = empty(Shape{C}, x.dtype(), x.device());
  if (need_dbias) g.dbias = empty(Shape{C}, x.dtype(), x.device());
  if (!need_dx && !need_dweight && !need_dbias) return g;
  const Tensor xc = core::contiguous(x), gc = core::contiguous(dout);
  const Tensor mc = core::contiguous(mean), rc = core::contiguous(rstd);
  const std::optional<Tensor> w = contiguous_or_none(weight);
  if (on_device(xc)) {
    device_kernels_of(xc).layernorm_backward(x.dtype(), raw_or_null(g.dx), raw_or_null(g.dweight),
                                             raw_or_null(g.dbias), gc.raw_data(), xc.raw_data(), raw_or_null(w),
                                             mc.raw_data(), rc.raw_data(), x.numel() / C, C);
    return g;
  }
  dispatch_floating(x.dtype(), what, [&]<class T>() {
    kernels::cpu::layernorm_backward<T>(
        data_or_null<T>(g.dx), data_or_null<T>(g.dweight), data_or_null<T>(g.dbias),
        gc.data_ptr<T>(), xc.data_ptr<T>(), data_or_null<T>(w), mc.data_ptr<acc_t<T>>(),
        rc.data_ptr<acc_t<T>>(), x.numel() / C, C);
  });
  return g;
}

RMSNormOutput rmsnorm(const Tensor& x, const std::optional<Tensor>& weight, double eps) {
  const char* what = "rmsnorm";
  const int64_t C = check_input(x, what);
  check_param(weight, x, what, "weight");
  check_eps(eps, what);
  const Tensor xc = core::contiguous(x);
  const std::optional<Tensor> w = contiguous_or_none(weight);
  RMSNormOutput r{empty(x.shape(), x.dtype(), x.device()),
                  empty(row_shape(x), acc_dtype(x.dtype()), x.device())};
  if (on_device(xc)) {
    device_kernels_of(xc).rmsnorm_forward(x.dtype(), r.out.raw_data(), r.rstd.raw_data(), xc.raw_data(),
                                          raw_or_null(w), x.numel() / C, C, eps);
    return r;
  }
  dispatch_floating(x.dtype(), what, [&]<class T>() {
    kernels::cpu::rmsnorm_forward<T>(r.out.data_ptr<T>(), r.rstd.data_ptr<acc_t<T>>(),
                                     xc.data_ptr<T>(), data_or_null<T>(w), x.numel() / C, C, eps);
  });
  return r;
}

RMSNormGrads rmsnorm_backward(const Tensor& dout, const Tensor& x,
                              const std::optional<Tensor>& weight, const Tensor& rstd, bool need_dx,
                              bool need_dweight) {
  const char* what = "rmsnorm_backward";
  const int64_t C = check_input(x, what);
  check_param(weight, x, what, "weight");
  check_output_grad(dout, x, what);
  check_statistic(rstd, x, what, "rstd");
  RMSNormGrads g;
  if (need_dx) g.dx = empty(x.shape(), x.dtype(), x.device());
  if (need_dweight) g.dweight = empty(Shape{C}, x.dtype(), x.device());
  if (!need_dx && !need_dweight) return g;
  const Tensor xc = core::contiguous(x), gc = core::contiguous(dout), rc = core::contiguous(rstd);
  const std::optional<Tensor> w = contiguous_or_none(weight);
  if (on_device(xc)) {
    device_kernels_of(xc).rmsnorm_backward(x.dtype(), raw_or_null(g.dx), raw_or_null(g.dweight), gc.raw_data(),
                                           xc.raw_data(), raw_or_null(w), rc.raw_data(), x.numel() / C, C);
    return g;
  }
  dispatch_floating(x.dtype(), what, [&]<class T>() {
    kernels::cpu::rmsnorm_backward<T>(data_or_null<T>(g.dx), data_or_null<T>(g.dweight),
                                      gc.data_ptr<T>(), xc.data_ptr<T>(), data_or_null<T>(w),
                                      rc.data_ptr<acc_t<T>>(), x.numel() / C, C);
  });
  return g;
}

}  // namespace trident::ops
