#include "ops/reduce.h"

#include "core/factory.h"
#include "core/views.h"
#include "kernels/cpu/reduce.h"
#include "ops/dispatch.h"

namespace trident::ops {
namespace {

Tensor reduce(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, bool is_mean,
              const char* what) {
  check_floating(x, what);
  bool flags[Dims::kMaxDims] = {};
  if (dims.empty()) {
    for (int i = 0; i < x.dim(); ++i) flags[i] = true;
  } else {
    for (int64_t d : dims) {
      const int nd = normalize_dim(d, x.dim(), what);
      TRI_CHECK(!flags[nd], what, ": dim ", d, " appears twice in the dims list");
      flags[nd] = true;
    }
  }
  Shape kept_shape, keep_shape;  // without and with the reduced dims (as size 1)
  int64_t count = 1;
  for (int i = 0; i < x.dim(); ++i) {
    keep_shape.push_back(flags[i] ? 1 : x.shape()[i]);
    if (flags[i]) count *= x.shape()[i];
    else kept_shape.push_back(x.shape()[i]);
  }
  Tensor out = empty(keepdim ? keep_shape : kept_shape, x.dtype(), x.device());
  const double scale = is_mean ? 1.0 / static_cast<double>(count) : 1.0;
  TRI_CHECK(!is_mean || count > 0, what, ": mean over an empty set of elements (shape ",
            x.shape(), ")");
  if (on_device(x)) {
    device_kernels_of(x).sum(x.dtype(), out.raw_data(), x.raw_data(), x.shape(), x.strides(), flags, scale);
    return out;
  }
  dispatch_floating(x.dtype(), what, [&]<class T>() {
    kernels::cpu::sum_forward<T>(out.data_ptr<T>(), x.data_ptr<T>(), x.shape(), x.strides(), flags,
                                 scale);
  });
  return out;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(x, dims, keepdim, false, "sum");
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(x, dims, keepdim, true, "mean");
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  TRI_CHECK(shape.size() <= x.dim(), "sum_to: cannot sum shape ", x.shape(), " to ", shape);
  const int lead = x.dim() - shape.size();
  std::vector<int64_t> dims;
  for (int i = 0; i < x.dim(); ++i) {
    if (i < lead) {
      dims.push_back(i);
    } else if (shape[i - lead] == 1 && x.shape()[i] != 1) {
      dims.push_back(i);
    } else {
      TRI_CHECK(shape[i - lead] == x.shape()[i], "sum_to: shape ", x.shape(),
                " does not broadcast from ", shape);
    }
  }
  if (dims.empty()) return views::view(core::contiguous(x), shape.span());
  Tensor s = sum(x, dims, /*keepdim=*/true);
  // Drop the leading dims (kept as size 1) to reach `shape`.
  return views::view(s, shape.span());
}

}  // namespace trident::ops
