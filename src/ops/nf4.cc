#include "ops/nf4.h"

#include "core/factory.h"
#include "core/parallel.h"
#include "kernels/cpu/nf4.h"
#include "ops/dispatch.h"

namespace trident::ops {

void nf4_dequantize_into(const Nf4Data& w, Device device, int64_t begin, int64_t end, DType dtype, void* out) {
  TRI_CHECK(0 <= begin && begin <= end, "nf4_dequantize: elements [", begin, ", ", end, ")");
  TRI_CHECK(is_floating(dtype), "nf4_dequantize: ", dtype_name(dtype), " is not a floating dtype");
  if (begin == end) return;
  if (!device.is_cpu()) {
    kernels::device_kernels(device).nf4_dequantize(dtype, out, w, begin, end);
    return;
  }
  dispatch_floating(dtype, "nf4_dequantize", [&]<class T>() {
    T* o = static_cast<T*>(out);
    parallel_for(begin, end, 16 * kNf4Block, [&](int64_t b, int64_t e) {
      kernels::cpu::nf4_dequantize<T>(w, b, e, o + (b - begin));
    });
  });
}

Tensor nf4_dequantize(const Nf4Data& w, Device device, int64_t begin, int64_t end, DType dtype) {
  Tensor out = empty({end - begin}, dtype, device);
  nf4_dequantize_into(w, device, begin, end, dtype, out.raw_data());
  return out;
}

}  // namespace trident::ops
