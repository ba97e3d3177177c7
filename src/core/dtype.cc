#include "core/dtype.h"

#include "core/check.h"

namespace trident {

size_t element_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF64: return 8;
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kU16: return 2;
  }
  TRI_ASSERT(false, "unknown dtype ", static_cast<int>(dtype));
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU16: return "u16";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType d : kAllDTypes)
    if (name == dtype_name(d)) return d;
  if (name == "float32" || name == "fp32") return DType::kF32;
  if (name == "float64" || name == "fp64") return DType::kF64;
  if (name == "bfloat16") return DType::kBF16;
  if (name == "float16" || name == "fp16") return DType::kF16;
  return std::nullopt;
}

bool is_floating(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF64 || dtype == DType::kBF16 ||
         dtype == DType::kF16;
}

bool is_integral(DType dtype) { return !is_floating(dtype); }

double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 0x1p-24;
    case DType::kF64: return 0x1p-53;
    case DType::kBF16: return 0x1p-8;
    case DType::kF16: return 0x1p-11;
    default: break;
  }
  TRI_CHECK_TYPE(false, "unit_roundoff: dtype ", dtype_name(dtype), " is not a floating type");
}

std::ostream& operator<<(std::ostream& os, DType dtype) { return os << dtype_name(dtype); }

}  // namespace trident
