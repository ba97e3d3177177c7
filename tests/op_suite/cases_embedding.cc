// Op-suite cases: embedding lookup, with every index dtype, repeated indices (the backward
// sums several rows), non-contiguous weights and indices, and a GPT-2-like row width.
#include "autograd/functions.h"
#include "kernels/reference/embedding.h"
#include "op_case.h"

namespace trident::testing {
namespace {

// The gradient of a weight row sums the output gradients of every token that used it: at
// most all N tokens, so N bounds the reduction length.
void embedding_case(const char* name, InputSpec weight, InputSpec indices,
                    std::vector<DType> dtypes = {DType::kF32, DType::kBF16}) {
  const int64_t tokens = indices.shape.product();
  add_case(
      OpCase("embedding", name)
          .input(std::move(weight))
          .input(std::move(indices))
          .forward([](const TensorList& x) { return TensorList{trident::embedding(x[0], x[1])}; })
          .reference([](const Arrays& x) { return Arrays{reference::embedding(x[0], x[1])}; })
          .reduction_length(tokens)
          .dtypes(std::move(dtypes)));
}

}  // namespace

TRI_OP_CASES(embedding_cases) {
  embedding_case("(B,T) i64 tokens", normal({11, 6}), index({2, 5}, 11, DType::kI64));
  embedding_case("3-d i32 indices, many repeats", normal({5, 7}), index({2, 3, 4}, 5, DType::kI32),
                 {DType::kF32, DType::kBF16, DType::kF16});
  embedding_case("u16 indices, transposed weight", normal({13, 9}).transposed(),
                 index({17}, 13, DType::kU16));
  embedding_case("strided weight, transposed indices", normal({9, 5}).strided(),
                 index({4, 3}, 9, DType::kI64).transposed());
  embedding_case("one token, one column", normal({4, 1}), index({1}, 4, DType::kI32));
  embedding_case("scalar index", normal({6, 3}), index({}, 6, DType::kI64));
  // Wider than the backward's 256-column block, not a multiple of 8.
  embedding_case("wide rows", normal({40, 301}), index({3, 7}, 40, DType::kI32));
}

}  // namespace trident::testing
