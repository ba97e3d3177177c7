#include "ops/rope.h"

#include <cmath>
#include <array>
#include <limits>
#include <span>

#include "core/factory.h"
#include "kernels/cpu/rope.h"
#include "ops/dispatch.h"

namespace trident::ops {

namespace {

// x's sizes (B, T, H, D), checked along with the parameters.
std::array<int64_t, 4> check_rope(const Tensor& x, const RopeParams& params, const char* what) {
  check_floating(x, what);
  TRI_CHECK(x.dim() == 4, what, ": expected x of shape (B, T, heads, head_size), got ", x.shape());
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2), D = x.size(3);
  TRI_CHECK(D % 2 == 0, what, ": head_size must be even (dims pair up as (i, i + head_size/2)), got ", D,
            " in x ", x.shape());
  const double theta = params.theta;
  TRI_CHECK(std::isfinite(theta) && theta > 1.0, what, ": theta (the rotary base) must be a finite number > 1, got ",
            theta);
  if (params.scaled())
    TRI_CHECK(std::isfinite(params.factor) && params.factor > 0.0 && params.low_freq_factor > 0.0 &&
                  params.high_freq_factor > params.low_freq_factor && params.original_max_position > 0,
              what, ": Llama 3 scaling needs factor > 0, 0 < low_freq_factor < high_freq_factor and "
              "original_max_position > 0; got factor ", params.factor, ", low_freq_factor ", params.low_freq_factor,
              ", high_freq_factor ", params.high_freq_factor, ", original_max_position ", params.original_max_position);
  return {B, T, H, D};
}

Tensor rope_at(const Tensor& x, const RopeParams& params, int64_t pos0, const int64_t* positions, bool inverse) {
  // Named copies, not a structured binding: the lambda below captures them, which clang before
  // 16 (the fuzz build's clang 14) refuses for bindings.
  const auto dims = check_rope(x, params, "rope");
  const int64_t B = dims[0], T = dims[1], H = dims[2], D = dims[3];
  const Tensor xc = core::contiguous(x);
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  if (on_device(xc)) {
    device_kernels_of(xc).rope(x.dtype(), out.raw_data(), xc.raw_data(), B, T, H, D, params, pos0, positions, inverse);
    return out;
  }
  dispatch_floating(x.dtype(), "rope", [&]<class T_>() {
    kernels::cpu::rope<T_>(out.data_ptr<T_>(), xc.data_ptr<T_>(), B, T, H, D, params, pos0, positions, inverse);
  });
  return out;
}

}  // namespace

Tensor rope(const Tensor& x, const RopeParams& params, int64_t pos0, bool inverse) {
  const char* what = "rope";
  const int64_t T = x.dim() == 4 ? x.size(1) : 0;
  TRI_CHECK(pos0 >= 0, what, ": the first position must be >= 0, got ", pos0);
  TRI_CHECK(pos0 <= std::numeric_limits<int64_t>::max() - T, what, ": the first position ", pos0, " plus ", T,
            " tokens overflows a 64-bit position");
  return rope_at(x, params, pos0, nullptr, inverse);
}

Tensor rope(const Tensor& x, const RopeParams& params, const Tensor& positions, bool inverse) {
  const char* what = "rope";
  TRI_CHECK(x.dim() == 4 && positions.shape() == Shape({x.size(0), x.size(1)}) && positions.dtype() == DType::kI64 &&
                positions.is_contiguous(),
            what, ": positions must be contiguous (B, T) i64 for x (B, T, heads, head_size) ", x.shape(), ", got ",
            positions.str());
  check_same_device(x, positions, what);
  if (!on_device(positions))
    for (const int64_t p : std::span(positions.data_ptr<int64_t>(), static_cast<size_t>(positions.numel())))
      TRI_CHECK(p >= 0, what, ": positions must be >= 0, got ", p);
  return rope_at(x, params, 0, positions.data_ptr<int64_t>(), inverse);
}

}  // namespace trident::ops
