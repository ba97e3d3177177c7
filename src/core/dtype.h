// Element types of tensors.
//   f32, bf16, f16: training data types (bf16/f16 are storage only; math is done in f32).
//   f64: the reference type used by tests.  i32, i64, u16: indices and token ids.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string_view>

#include "core/half.h"

namespace trident {

enum class DType : uint8_t { kF32, kF64, kBF16, kF16, kI32, kI64, kU16 };

inline constexpr DType kAllDTypes[] = {DType::kF32, DType::kF64, DType::kBF16, DType::kF16,
                                       DType::kI32, DType::kI64, DType::kU16};

size_t element_size(DType dtype);
const char* dtype_name(DType dtype);  // "f32", "bf16", ...
std::optional<DType> parse_dtype(std::string_view name);
bool is_floating(DType dtype);
bool is_integral(DType dtype);
// Unit roundoff of a floating dtype (half the machine epsilon): the relative error of one
// rounding. Tolerances in tests are derived from it (docs/numerics.md).
double unit_roundoff(DType dtype);

std::ostream& operator<<(std::ostream& os, DType dtype);

template <class T>
constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::kF32; }
template <> constexpr DType dtype_of<double>() { return DType::kF64; }
template <> constexpr DType dtype_of<bf16>() { return DType::kBF16; }
template <> constexpr DType dtype_of<f16>() { return DType::kF16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::kI32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::kI64; }
template <> constexpr DType dtype_of<uint16_t>() { return DType::kU16; }

// The type kernels accumulate in: double for f64, float for every other floating type.
template <class T> struct AccType { using type = float; };
template <> struct AccType<double> { using type = double; };
template <class T> using acc_t = typename AccType<T>::type;

}  // namespace trident

// X(float) X(double) X(bf16) X(f16): applies macro X to every floating element type, for the
// explicit instantiations of kernel templates:
//   #define TRI_INSTANTIATE(T) template void foo_forward<T>(T*, const T*, int64_t);
//   TRI_FOR_EACH_FLOATING_TYPE(TRI_INSTANTIATE)
//   #undef TRI_INSTANTIATE
#define TRI_FOR_EACH_FLOATING_TYPE(X) X(float) X(double) X(bf16) X(f16)
