// Op-suite cases: concat (along the first, a middle and the last dim, non-contiguous and
// broadcast inputs) and split (unequal sizes, chunks with a short last piece, an empty piece,
// non-contiguous input).
#include "autograd/functions.h"
#include "kernels/reference/shape.h"
#include "op_case.h"

namespace trident::testing {
namespace {

const std::vector<DType> kJoinTypes = {DType::kF32, DType::kBF16};

void concat_case(const char* name, std::vector<InputSpec> inputs, int64_t dim) {
  OpCase c("concat", name);
  for (InputSpec& spec : inputs) std::move(c).input(std::move(spec));  // appends to c
  add_case(std::move(c)
               .forward([dim](const TensorList& x) { return TensorList{trident::concat(x, dim)}; })
               .reference([dim](const Arrays& x) { return Arrays{reference::concat(x, dim)}; })
               .dtypes(kJoinTypes));
}

// The reference of a split: consecutive narrows of the given sizes.
Arrays split_reference(const reference::Array& x, const std::vector<int64_t>& sizes, int64_t dim) {
  Arrays out;
  int64_t start = 0;
  for (int64_t size : sizes) {
    out.push_back(reference::narrow(x, dim, start, size));
    start += size;
  }
  return out;
}

void split_sizes_case(const char* name, InputSpec x, std::vector<int64_t> sizes, int64_t dim) {
  add_case(OpCase("split", name)
               .input(std::move(x))
               .forward([=](const TensorList& x) { return trident::split(x[0], sizes, dim); })
               .reference([=](const Arrays& x) { return split_reference(x[0], sizes, dim); })
               .dtypes(kJoinTypes));
}

// chunk: the sizes it produces (written out) are what the reference narrows.
void split_chunk_case(const char* name, InputSpec x, int64_t chunk, std::vector<int64_t> sizes,
                      int64_t dim) {
  add_case(OpCase("split", name)
               .input(std::move(x))
               .forward([=](const TensorList& x) { return trident::split_chunks(x[0], chunk, dim); })
               .reference([=](const Arrays& x) { return split_reference(x[0], sizes, dim); })
               .dtypes(kJoinTypes));
}

}  // namespace

TRI_OP_CASES(join_cases) {
  concat_case("dim 0, transposed input",
              {normal({2, 5}), normal({3, 5}).transposed(), normal({1, 5})}, 0);
  concat_case("middle dim, strided input",
              {normal({2, 3, 4}), normal({2, 1, 4}).strided(), normal({2, 5, 4})}, 1);
  concat_case("last dim, negative index",
              {normal({3, 4}), normal({3, 7}).transposed(), normal({3, 1})}, -1);
  concat_case("broadcast input", {normal({1, 4}).broadcast(3), normal({3, 2})}, 1);
  concat_case("single input", {normal({3, 3}).strided()}, 0);
  concat_case("wide rows", {normal({17, 130}), normal({17, 67}).strided()}, 1);

  split_sizes_case("unequal sizes, middle dim", normal({2, 6, 3}), {2, 3, 1}, 1);
  split_sizes_case("transposed input, last dim", normal({5, 7}).transposed(), {4, 3}, -1);
  split_sizes_case("empty piece", normal({5, 4}), {0, 3, 2}, 0);
  split_sizes_case("strided input, dim 0", normal({9, 6}).strided(), {1, 8}, 0);
  split_chunk_case("chunks, short last", normal({10, 3}), 4, {4, 4, 2}, 0);
  split_chunk_case("chunks, exact, strided", normal({3, 8}).strided(), 2, {2, 2, 2, 2}, 1);
}

}  // namespace trident::testing
