// Op-suite cases: sum and mean over dims.
#include "autograd/functions.h"
#include "kernels/reference/reduce.h"
#include "op_case.h"

namespace trident::testing {
namespace {

void reduce_cases(const char* op, bool mean) {
  struct Spec {
    const char* name;
    InputSpec input;
    std::vector<int64_t> dims;
    bool keepdim;
    int64_t k;
  };
  const Spec specs[] = {
      {"all dims", normal({4, 5, 6}), {}, false, 120},
      {"last dim", normal({4, 5, 33}), {-1}, false, 33},
      {"first dim keepdim", normal({40, 6}), {0}, true, 40},
      {"middle dims", normal({3, 4, 5, 6}), {1, 2}, false, 20},
      {"transposed input", normal({7, 9}).transposed(), {1}, false, 9},
      {"strided input", normal({5, 8}).strided(), {0}, false, 5},
      {"long row", normal({2, 5000}), {1}, true, 5000},
      // Column sums by 16-byte vectors on a GPU (Note [Column sums by vectors] in
      // kernels/cuda/reduce.cu): row chunks with a short last one, a partial block of columns.
      {"column sums, chunks of rows", normal({1000, 72}), {0}, false, 1000},
      {"column sums over two dims", normal({3, 200, 264}), {0, 1}, false, 600},
  };
  for (const Spec& s : specs) {
    const std::vector<int64_t> dims = s.dims;
    const bool keep = s.keepdim;
    add_case(OpCase(op, s.name)
                 .input(s.input)
                 .forward([=](const TensorList& x) {
                   return TensorList{mean ? trident::mean(x[0], dims, keep) : trident::sum(x[0], dims, keep)};
                 })
                 .reference([=](const Arrays& x) {
                   return Arrays{mean ? reference::mean(x[0], dims, keep) : reference::sum(x[0], dims, keep)};
                 })
                 .reduction_length(s.k)
                 .dtypes({DType::kF32, DType::kBF16}));
  }
}

}  // namespace

TRI_OP_CASES(reduce_cases_all) {
  reduce_cases("sum", false);
  reduce_cases("mean", true);
}

}  // namespace trident::testing
