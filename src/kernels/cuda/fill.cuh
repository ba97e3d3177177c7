// Device kernels behind DeviceOps::fill, in plain types so that only CUDA code sees CUDA
// headers. dtype codes: 0 f32, 1 f64, 2 bf16, 3 f16, 4 i32, 5 i64, 6 u16 (trident's DType order).
#pragma once

#include <cstdint>

namespace trident::cuda {

void launch_fill(void* dst, int dtype_code, int64_t n, double value);

}  // namespace trident::cuda
