#include "core/copy.h"

#include <type_traits>

#include "core/device_ops.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "core/shape.h"
#include "core/views.h"

namespace trident {
namespace {

template <class D, class S>
inline D convert(S s) {
  if constexpr (std::is_same_v<D, S>) {
    return s;
  } else if constexpr (std::is_same_v<D, bf16> || std::is_same_v<D, f16>) {
    return D(static_cast<float>(s));
  } else if constexpr (std::is_same_v<S, bf16> || std::is_same_v<S, f16>) {
    return static_cast<D>(static_cast<float>(s));
  } else {
    return static_cast<D>(s);
  }
}

template <class D, class S>
void copy_kernel(D* dst, const S* src, Shape shape, Strides ds, Strides ss) {
  const int nd = coalesce_dims(shape, ds, ss);  // a contiguous block runs as one flat loop
  if (nd == 0) {
    dst[0] = convert<D>(src[0]);
    return;
  }
  const int64_t inner = shape[nd - 1], dsi = ds[nd - 1], ssi = ss[nd - 1];
  int64_t outer = 1;
  for (int i = 0; i < nd - 1; ++i) outer *= shape[i];
  // Rows cut into pieces: a contiguous block, coalesced into one row, still runs on every thread.
  parallel_for_row_pieces(outer, inner, 32768, [&](int64_t o, int64_t j0, int64_t j1) {
    // Unravel the outer index into offsets.
    int64_t rem = o, doff = 0, soff = 0;
    for (int i = nd - 2; i >= 0; --i) {
      const int64_t idx = rem % shape[i];
      rem /= shape[i];
      doff += idx * ds[i];
      soff += idx * ss[i];
    }
    D* d = dst + doff;
    const S* s = src + soff;
    if (dsi == 1 && ssi == 1) {
      for (int64_t j = j0; j < j1; ++j) d[j] = convert<D>(s[j]);
    } else {
      for (int64_t j = j0; j < j1; ++j) d[j * dsi] = convert<D>(s[j * ssi]);
    }
  });
}

template <class Fn>
void dispatch_any(DType dtype, const Fn& fn) {
  switch (dtype) {
    case DType::kF32: return fn(float{});
    case DType::kF64: return fn(double{});
    case DType::kBF16: return fn(bf16{});
    case DType::kF16: return fn(f16{});
    case DType::kI32: return fn(int32_t{});
    case DType::kI64: return fn(int64_t{});
    case DType::kU16: return fn(uint16_t{});
  }
}

}  // namespace

namespace core {

namespace {

// A copy that involves a device. Within one device the backend converts and restrides
// (DeviceOps::copy_strided). Between the host and a device only contiguous bytes of one
// dtype travel; the side that holds a non-contiguous or differently typed tensor converts
// it first.
void device_copy(const Tensor& dst, const Tensor& src) {
  const Device device = dst.device().is_cpu() ? src.device() : dst.device();
  const DeviceOps* ops = device_ops(device.type);
  TRI_CHECK_NOT_IMPLEMENTED(ops != nullptr, "copy_: device ", device, " is not available in this build");
  TRI_CHECK_NOT_IMPLEMENTED(dst.device().is_cpu() || src.device().is_cpu() || dst.device() == src.device(),
                            "copy_ from ", src.device(), " to ", dst.device(),
                            ": copies between two devices go through the host");
  if (dst.numel() == 0) return;
  if (dst.device() == src.device()) {
    Shape shape = dst.shape();
    Strides ds = dst.strides(), ss = src.strides();
    const int nd = coalesce_dims(shape, ds, ss);
    ops->copy_strided(dst.raw_data(), dst.dtype(), ds.begin(), src.raw_data(), src.dtype(), ss.begin(), shape.begin(),
                      nd);
  } else if (src.device().is_cpu()) {  // host -> device, from pinned staging unless src is ready
    Tensor s = src;
    if (!src.is_contiguous() || src.dtype() != dst.dtype()) {
      s = empty_pinned(src.shape(), dst.dtype());
      copy_(s, src);
    }
    if (dst.is_contiguous()) {
      ops->copy(dst.raw_data(), dst.device(), s.raw_data(), s.device(), dst.nbytes());
    } else {
      const Tensor staged = empty(dst.shape(), dst.dtype(), dst.device());
      ops->copy(staged.raw_data(), staged.device(), s.raw_data(), s.device(), staged.nbytes());
      copy_(dst, staged);
    }
  } else {  // device -> host
    const Tensor s = cast(src, dst.dtype());  // on the device, contiguous
    if (dst.is_contiguous()) {
      ops->copy(dst.raw_data(), dst.device(), s.raw_data(), s.device(), dst.nbytes());
    } else {
      const Tensor staged = empty_pinned(dst.shape(), dst.dtype());
      ops->copy(staged.raw_data(), staged.device(), s.raw_data(), s.device(), staged.nbytes());
      copy_(dst, staged);
    }
  }
  dst.bump_version();
}

// The backend of a byte copy between the host and a device, of tensors of one shape and dtype,
// both contiguous (checked; the messages name `op`).
const DeviceOps& host_device_ops(const Tensor& dst, const Tensor& src, const char* op) {
  TRI_CHECK(dst.device().is_cpu() != src.device().is_cpu(), op, ": one tensor must be on the host and one on a ",
            "device, got ", src.device(), " -> ", dst.device());
  TRI_CHECK(dst.shape() == src.shape() && dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous(),
            op, ": tensors of one shape and dtype, both contiguous, got ", src.str(), " -> ", dst.str());
  const Device device = dst.device().is_cpu() ? src.device() : dst.device();
  const DeviceOps* ops = device_ops(device.type);
  TRI_CHECK_NOT_IMPLEMENTED(ops != nullptr, op, ": device ", device, " is not available in this build");
  return *ops;
}

}  // namespace

void copy_async_(const Tensor& dst, const Tensor& src) {
  const DeviceOps& ops = host_device_ops(dst, src, "copy_async_");
  if (dst.numel() > 0) {
    if (ops.copy_async != nullptr) {
      ops.copy_async(dst.raw_data(), dst.device(), src.raw_data(), src.device(), dst.nbytes());
    } else {
      ops.copy(dst.raw_data(), dst.device(), src.raw_data(), src.device(), dst.nbytes());
    }
  }
  dst.bump_version();
}

void copy_bytes_(const Tensor& dst, const Tensor& src) {
  const DeviceOps& ops = host_device_ops(dst, src, "copy_bytes_");
  if (dst.numel() > 0) ops.copy(dst.raw_data(), dst.device(), src.raw_data(), src.device(), dst.nbytes());
}

void wait_async_copies(Device device) {
  if (device.is_cpu()) return;
  const DeviceOps* ops = device_ops(device.type);
  TRI_CHECK_NOT_IMPLEMENTED(ops != nullptr, "wait_async_copies: device ", device, " is not available in this build");
  if (ops->wait_copies != nullptr) ops->wait_copies();
}

Tensor pin_memory(const Tensor& t) {
  Tensor out = empty_pinned(t.shape(), t.dtype());
  copy_(out, t);
  return out;
}

Tensor to_device(const Tensor& t, Device device) {
  if (t.device() == device) return t;
  Tensor out = empty(t.shape(), t.dtype(), device);
  copy_(out, t.device().is_cpu() ? contiguous(t) : t);
  return out;
}

void copy_(const Tensor& dst, const Tensor& src) {
  for (int i = 0; i < dst.dim(); ++i)
    TRI_CHECK(dst.strides()[i] != 0 || dst.shape()[i] <= 1, "copy_: the destination (shape ",
              dst.shape(), ", strides ", dst.strides(), ") has overlapping elements");
  const Tensor s = src.shape() == dst.shape() ? src : views::expand(src, dst.shape());
  if (!dst.device().is_cpu() || !s.device().is_cpu()) return device_copy(dst, s);
  if (dst.numel() == 0) return;
  dispatch_any(dst.dtype(), [&](auto d) {
    dispatch_any(s.dtype(), [&](auto sv) {
      using D = decltype(d);
      using S = decltype(sv);
      copy_kernel<D, S>(static_cast<D*>(dst.raw_data()), static_cast<const S*>(s.raw_data()),
                        dst.shape(), dst.strides(), s.strides());
    });
  });
  dst.bump_version();
}

Tensor contiguous(const Tensor& t) { return t.is_contiguous() ? t : clone(t); }

Tensor clone(const Tensor& t) {
  Tensor out = empty(t.shape(), t.dtype(), t.device());
  copy_(out, t);
  return out;
}

Tensor cast(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype && t.is_contiguous()) return t;
  Tensor out = empty(t.shape(), dtype, t.device());
  copy_(out, t);
  return out;
}

}  // namespace core
}  // namespace trident
