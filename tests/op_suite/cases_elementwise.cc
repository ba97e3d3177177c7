// Op-suite cases: elementwise arithmetic, including broadcasting and non-contiguous inputs.
#include "autograd/functions.h"
#include "kernels/reference/elementwise.h"
#include "op_case.h"

namespace trident::testing {
namespace {

const std::vector<DType> kFloatTypes = {DType::kF32, DType::kBF16, DType::kF16};

using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);
using BinaryRef = reference::Array (*)(const reference::Array&, const reference::Array&);

void binary_cases(const char* op, BinaryFn fn, BinaryRef ref, bool positive_rhs) {
  auto rhs = [&](const Shape& s) { return positive_rhs ? uniform(s, 0.5, 2.0) : normal(s); };
  auto make = [&](std::string name, InputSpec a, InputSpec b) {
    add_case(OpCase(op, std::move(name))
                 .input(std::move(a))
                 .input(std::move(b))
                 .forward([fn](const TensorList& x) { return TensorList{fn(x[0], x[1])}; })
                 .reference([ref](const Arrays& x) { return Arrays{ref(x[0], x[1])}; })
                 .dtypes(kFloatTypes));
  };
  make("same shape", normal({3, 5, 7}), rhs({3, 5, 7}));
  make("broadcast rows", normal({4, 6}), rhs({6}));
  make("broadcast both", normal({3, 1, 5}), rhs({4, 1}));
  make("scalar rhs", normal({2, 9}), rhs({}));
  make("transposed lhs", normal({6, 5}).transposed(), rhs({6, 5}));
  make("strided rhs", normal({4, 7}), rhs({4, 7}).strided());
  make("expanded lhs", normal({1, 8}).broadcast(3), rhs({3, 8}));
  make("large", normal({300, 257}), rhs({300, 257}));
}

}  // namespace

TRI_OP_CASES(elementwise_cases) {
  binary_cases("add", &trident::add, &reference::add, false);
  binary_cases("sub", &trident::sub, &reference::sub, false);
  binary_cases("mul", &trident::mul, &reference::mul, false);
  binary_cases("div", &trident::div, &reference::div, true);
  for (auto [name, spec] : {std::pair{"contiguous", normal({4, 9})}, std::pair{"transposed", normal({5, 6}).transposed()}})
    add_case(OpCase("affine", name)
                 .input(spec)
                 .forward([](const TensorList& x) { return TensorList{trident::affine(x[0], -1.5, 0.25)}; })
                 .reference([](const Arrays& x) { return Arrays{reference::affine(x[0], -1.5, 0.25)}; })
                 .dtypes(kFloatTypes));
}

}  // namespace trident::testing
