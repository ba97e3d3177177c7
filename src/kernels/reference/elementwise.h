// Reference elementwise arithmetic with NumPy broadcasting.
#pragma once

#include "kernels/reference/array.h"

namespace trident::reference {

Array add(const Array& a, const Array& b);
Array sub(const Array& a, const Array& b);
Array mul(const Array& a, const Array& b);
Array div(const Array& a, const Array& b);
Array affine(const Array& a, double scale, double shift);  // a * scale + shift

// Applies fn(x, y) over the broadcast of a and b.
template <class Fn>
Array broadcast_binary(const Array& a, const Array& b, Fn fn);

}  // namespace trident::reference

#include "kernels/reference/elementwise_impl.h"
