// Op-suite cases: pointwise functions (exp, log, tanh, sqrt, pow, gelu_tanh, gelu, silu) on
// contiguous, transposed, strided and broadcast inputs, awkward sizes, a size that splits
// across threads, and a wide range of values that reaches the functions' tails.
// Each output element depends on one input element: reduction_length is 1.
#include "autograd/functions.h"
#include "kernels/reference/elementwise.h"
#include "kernels/reference/pointwise.h"
#include "op_case.h"

namespace trident::testing {
namespace {

const std::vector<DType> kPointwiseTypes = {DType::kF32, DType::kBF16, DType::kF16};

using UnaryFn = std::function<Tensor(const Tensor&)>;
using UnaryRef = std::function<reference::Array(const reference::Array&)>;
using InputFn = std::function<InputSpec(const Shape&)>;

void add_unary(const char* op, const std::string& name, InputSpec input, const UnaryFn& fn,
               const UnaryRef& ref) {
  add_case(OpCase(op, name)
               .input(std::move(input))
               .forward([fn](const TensorList& x) { return TensorList{fn(x[0])}; })
               .reference([ref](const Arrays& x) { return Arrays{ref(x[0])}; })
               .dtypes(kPointwiseTypes));
}

// The layouts and sizes every pointwise op is checked on; `in` draws values from the op's
// domain, `wide` from a range that covers its tails (kept finite in f16).
void unary_cases(const char* op, const UnaryFn& fn, const UnaryRef& ref, const InputFn& in,
                 InputSpec wide) {
  add_unary(op, "3d odd sizes", in({3, 5, 7}), fn, ref);
  add_unary(op, "one element", in({1}), fn, ref);
  add_unary(op, "0-dim", in({}), fn, ref);
  add_unary(op, "transposed", in({6, 5}).transposed(), fn, ref);
  add_unary(op, "strided", in({4, 9}).strided(), fn, ref);
  add_unary(op, "broadcast", in({1, 13}).broadcast(3), fn, ref);
  add_unary(op, "large", in({129, 257}), fn, ref);  // more than one parallel chunk
  add_unary(op, "wide range", std::move(wide), fn, ref);
}

InputSpec normal_values(const Shape& s) {
  return normal(s);
}
// log and sqrt: positive, and far enough from 0 for the finite-difference step (1e-3).
InputSpec positive_values(const Shape& s) {
  return uniform(s, 0.1, 5.0);
}

void pow_case(const std::string& name, double exponent, InputSpec input) {
  add_unary(
      "pow", name, std::move(input),
      [exponent](const Tensor& x) { return trident::pow(x, exponent); },
      [exponent](const reference::Array& x) { return reference::pow(x, exponent); });
}

}  // namespace

TRI_OP_CASES(pointwise_cases) {
  unary_cases(
      "exp", [](const Tensor& x) { return trident::exp(x); },
      [](const reference::Array& x) { return reference::exp(x); }, normal_values,
      uniform({9, 23}, -10.0, 10.0));
  unary_cases(
      "log", [](const Tensor& x) { return trident::log(x); },
      [](const reference::Array& x) { return reference::log(x); }, positive_values,
      uniform({9, 23}, 0.1, 1000.0));
  unary_cases(
      "tanh", [](const Tensor& x) { return trident::tanh(x); },
      [](const reference::Array& x) { return reference::tanh(x); }, normal_values,
      uniform({9, 23}, -6.0, 6.0));
  unary_cases(
      "sqrt", [](const Tensor& x) { return trident::sqrt(x); },
      [](const reference::Array& x) { return reference::sqrt(x); }, positive_values,
      uniform({9, 23}, 0.1, 1000.0));
  unary_cases(
      "gelu_tanh", [](const Tensor& x) { return trident::gelu_tanh(x); },
      [](const reference::Array& x) { return reference::gelu_tanh(x); }, normal_values,
      uniform({9, 23}, -8.0, 8.0));
  unary_cases(
      "gelu", [](const Tensor& x) { return trident::gelu(x); },
      [](const reference::Array& x) { return reference::gelu(x); }, normal_values,
      uniform({9, 23}, -8.0, 8.0));
  unary_cases(
      "silu", [](const Tensor& x) { return trident::silu(x); },
      [](const reference::Array& x) { return reference::silu(x); }, normal_values,
      uniform({9, 23}, -12.0, 12.0));

  // pow: the vectorized small-integer path (negative bases included), the std::pow path for
  // other exponents, and the layouts.
  pow_case("square", 2.0, normal({3, 5, 7}));
  pow_case("square transposed", 2.0, normal({6, 5}).transposed());
  pow_case("square strided", 2.0, normal({4, 9}).strided());
  pow_case("square broadcast", 2.0, normal({1, 13}).broadcast(3));
  pow_case("square large", 2.0, normal({129, 257}));
  pow_case("cube of negative and positive", 3.0, normal({7, 11}));
  pow_case("odd power 7", 7.0, uniform({5, 13}, -2.0, 2.0));
  pow_case("reciprocal of negatives", -1.0, uniform({5, 13}, -2.0, -0.5));
  pow_case("inverse square", -2.0, uniform({5, 13}, 0.5, 2.0));
  pow_case("integer beyond the fast path", 20.0, uniform({5, 13}, 0.8, 1.1));
  pow_case("square root", 0.5, uniform({5, 13}, 0.5, 4.0));
  pow_case("inverse square root", -0.5, uniform({5, 13}, 0.5, 4.0));
  pow_case("fractional 2.5", 2.5, uniform({1, 17}, 0.1, 3.0).broadcast(2));
  // x^0 has an identically zero gradient, and finite differences of a constant are pure
  // rounding noise that a relative tolerance cannot accept; multiplying by x gives the
  // gradient a nonzero part while pow's backward must still contribute exactly 0.
  add_case(
      OpCase("pow", "zero exponent, times x")
          .input(normal({5, 13}))
          .forward([](const TensorList& x) { return TensorList{trident::pow(x[0], 0.0) * x[0]}; })
          .reference([](const Arrays& x) {
            return Arrays{reference::mul(reference::pow(x[0], 0.0), x[0])};
          })
          .dtypes(kPointwiseTypes));
}

}  // namespace trident::testing
