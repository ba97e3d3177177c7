// Op-suite cases: a mixture-of-experts layer's grouped products (expert-sorted rows times
// each group's weight, an empty group and groups of one row among them, and groups larger
// than one GEMM block, which run over every thread) and the scatter of expert outputs back
// into their tokens (repeated tokens: top-k's k rows per token).
#include "autograd/functions.h"
#include "kernels/reference/moe.h"
#include "op_case.h"

namespace trident::testing {
namespace {

// x (M, in) and E weights (out, in); the weights' gradients sum over a group's rows.
void grouped_linear_case(const std::string& name, int64_t in, int64_t out, std::vector<int64_t> offsets,
                         bool transposed_x = false) {
  const int64_t groups = static_cast<int64_t>(offsets.size()) - 1, rows = offsets.back();
  int64_t longest = in;
  for (int64_t e = 0; e < groups; ++e) longest = std::max(longest, offsets[e + 1] - offsets[e]);
  InputSpec x = normal({rows, in});
  if (transposed_x) x.transposed();
  OpCase c("grouped_linear", name);
  (void)std::move(c).input(std::move(x));  // in place: input() returns c itself
  for (int64_t e = 0; e < groups; ++e) (void)std::move(c).input(normal({out, in}));
  add_case(std::move(c)
               .forward([offsets](const TensorList& t) {
                 return TensorList{trident::grouped_linear(t[0], TensorList(t.begin() + 1, t.end()), offsets)};
               })
               .reference([offsets](const Arrays& a) {
                 return Arrays{reference::grouped_linear(a[0], Arrays(a.begin() + 1, a.end()), offsets)};
               })
               .reduction_length(std::max(longest, out))
               .dtypes({DType::kF32, DType::kBF16}));
}

void scatter_add_rows_case(const std::string& name, InputSpec src, int64_t rows) {
  const int64_t m = src.shape[0];
  add_case(OpCase("scatter_add_rows", name)
               .input(std::move(src))
               .input(index({m}, rows, DType::kI64))
               .forward([rows](const TensorList& t) { return TensorList{trident::scatter_add_rows(t[0], t[1], rows)}; })
               .reference([rows](const Arrays& a) { return Arrays{reference::scatter_add_rows(a[0], a[1], rows)}; })
               .reduction_length(m)
               .dtypes({DType::kF32, DType::kBF16}));
}

}  // namespace

TRI_OP_CASES(moe_cases) {
  grouped_linear_case("four experts, one empty", 7, 5, {0, 3, 3, 4, 9});
  grouped_linear_case("one expert", 6, 4, {0, 5});
  grouped_linear_case("transposed rows, single-row groups", 5, 3, {0, 1, 2, 3}, true);
  // A group over one GEMM block (256 rows) runs over every thread, the small ones side by side.
  grouped_linear_case("a group over one GEMM block", 9, 6, {0, 2, 300, 305});
  scatter_add_rows_case("top-2 rows back to 5 tokens", normal({10, 6}), 5);
  scatter_add_rows_case("strided rows, more tokens than rows", normal({7, 4}).strided(), 9);
}

}  // namespace trident::testing
