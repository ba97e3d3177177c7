// Op-suite cases: softmax and log_softmax over the last dim, the first, a middle one (with
// more adjacent columns than one kernel block holds), negative dims, non-contiguous and
// broadcast inputs, size-1 and 0-dim inputs, long rows, enough rows or columns to split
// across threads, and logits large enough to overflow exp without the max subtraction.
// reduction_length is the softmax dim's size: each output sums exp over it, and each
// gradient sums dy * y (or dy) over it.
#include "autograd/functions.h"
#include "kernels/reference/elementwise.h"
#include "kernels/reference/softmax.h"
#include "op_case.h"

namespace trident::testing {
namespace {

void softmax_cases(const char* op, bool log) {
  struct Spec {
    const char* name;
    InputSpec input;
    int64_t dim;
    int64_t k;
  };
  const Spec specs[] = {
      {"last dim", normal({4, 33}), -1, 33},
      {"3d last dim positive index", normal({2, 3, 17}), 2, 17},
      {"first dim", normal({37, 5}), 0, 37},
      {"middle dim", normal({2, 7, 9, 3}), 1, 7},
      {"dim -2", normal({4, 6, 5}), -2, 6},
      {"middle dim, 70 columns", normal({3, 11, 70}), 1, 11},
      {"transposed input", normal({5, 19}).transposed(), -1, 19},
      {"transposed input first dim", normal({6, 13}).transposed(), 0, 6},
      {"strided input", normal({6, 40}).strided(), -1, 40},
      {"broadcast input", normal({1, 17}).broadcast(4), -1, 17},
      {"along a broadcast dim", normal({1, 9}).broadcast(5), 0, 5},
      {"long rows", normal({3, 3000}), -1, 3000},
      {"many rows", normal({300, 65}), -1, 65},
      {"many columns", normal({40, 600}), 0, 40},
      // exp(x) overflows for these without the max subtraction.
      {"large logits", uniform({4, 50}, 400.0, 410.0), -1, 50},
  };
  for (const Spec& s : specs) {
    const int64_t dim = s.dim;
    add_case(OpCase(op, s.name)
                 .input(s.input)
                 .forward([=](const TensorList& x) {
                   return TensorList{log ? trident::log_softmax(x[0], dim)
                                         : trident::softmax(x[0], dim)};
                 })
                 .reference([=](const Arrays& x) {
                   return Arrays{log ? reference::log_softmax(x[0], dim)
                                     : reference::softmax(x[0], dim)};
                 })
                 .reduction_length(s.k)
                 .dtypes({DType::kF32, DType::kBF16}));
  }

  // Over a dim of size 1 (or a 0-dim tensor) the result is constant (1, or 0 for
  // log_softmax) and the gradient identically zero; finite differences of a constant are
  // pure rounding noise that a relative tolerance cannot accept, so these cases multiply by
  // x, and softmax's backward must contribute exactly 0 to the gradient.
  for (auto [name, shape] :
       {std::pair{"size-1 dim, times x", Shape{5, 1}}, std::pair{"0-dim, times x", Shape{}}}) {
    add_case(
        OpCase(op, name)
            .input(normal(shape))
            .forward([=](const TensorList& x) {
              return TensorList{
                  (log ? trident::log_softmax(x[0], -1) : trident::softmax(x[0], -1)) * x[0]};
            })
            .reference([=](const Arrays& x) {
              return Arrays{reference::mul(
                  log ? reference::log_softmax(x[0], -1) : reference::softmax(x[0], -1), x[0])};
            })
            .dtypes({DType::kF32, DType::kBF16}));
  }
}

}  // namespace

TRI_OP_CASES(softmax_cases_all) {
  softmax_cases("softmax", false);
  softmax_cases("log_softmax", true);

  // Logits spread over 200 make the distribution one-hot to float precision. log_softmax
  // stays well conditioned there (outputs down to -200, gradient g - exp(y) sum g). softmax
  // does not: its gradient for the top class, y (g - sum g y) = y sum_j y_j (g - g_j), is
  // as small as the other probabilities (1e-7 here), while the stored y ~ 1 is only known
  // to u/2 = 3e-8 in f32; no backward from the saved output (PyTorch's included) can meet a
  // tolerance relative to that gradient. softmax's stability case above shifts instead.
  add_case(
      OpCase("log_softmax", "logits spread over 200")
          .input(uniform({4, 50}, -100.0, 100.0))
          .forward([](const TensorList& x) { return TensorList{trident::log_softmax(x[0], -1)}; })
          .reference([](const Arrays& x) { return Arrays{reference::log_softmax(x[0], -1)}; })
          .reduction_length(50)
          .dtypes({DType::kF32, DType::kBF16}));
}

}  // namespace trident::testing
