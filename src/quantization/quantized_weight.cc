#include "quantization/quantized_weight.h"

#include "core/check.h"
#include "core/factory.h"

namespace trident::quantization {

void QuantizedWeight::check_range(int64_t begin, int64_t end) const {
  TRI_CHECK(0 <= begin && begin <= end && end <= numel(), scheme(), " weight ", shape(), ": elements [", begin, ", ", end,
            ") are outside its ", numel());
}

Tensor QuantizedWeight::dequantize(int64_t begin, int64_t end, DType dtype) const {
  check_range(begin, end);
  Tensor out = empty({end - begin}, dtype, device());
  dequantize_into(begin, end, dtype, out.raw_data());
  return out;
}

Tensor QuantizedWeight::dequantize() const {
  Tensor out = empty(shape(), dtype(), device());
  dequantize_into(0, numel(), dtype(), out.raw_data());
  return out;
}

bool QuantizedWeight::fused_product(DType, const void*, int64_t, void*, const void*) const { return false; }

}  // namespace trident::quantization
