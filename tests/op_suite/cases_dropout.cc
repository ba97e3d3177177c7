// Op-suite cases: dropout. Each forward builds its Generator from a fixed seed (and advances
// it to a fixed offset), so the f32, bf16 and f64 runs and the reference all use one mask;
// with the mask fixed, dropout is linear in x and finite differences apply.
#include "autograd/functions.h"
#include "kernels/reference/dropout.h"
#include "op_case.h"

namespace trident::testing {
namespace {

struct DropoutSpec {
  const char* name;
  InputSpec x;
  double p;
  bool training;
  uint64_t seed;
  uint64_t offset;  // counters reserved before the call
};

void dropout_case(const DropoutSpec& s) {
  const double p = s.p;
  const bool training = s.training;
  const uint64_t seed = s.seed, offset = s.offset;
  add_case(OpCase("dropout", s.name)
               .input(s.x)
               .forward([=](const TensorList& x) {
                 Generator gen(seed);
                 gen.reserve(offset);
                 return TensorList{trident::dropout(x[0], p, gen, training)};
               })
               .reference([=](const Arrays& x) {
                 return Arrays{training ? reference::dropout(x[0], p, seed, offset) : x[0]};
               })
               .dtypes({DType::kF32, DType::kBF16}));
}

}  // namespace

TRI_OP_CASES(dropout_cases) {
  const DropoutSpec specs[] = {
      {"p=0.3", normal({7, 13}), 0.3, true, 1234, 0},
      // 54 elements: the last Philox counter is only partly used; offset 5 is not a block start.
      {"p=0.5 transposed, offset", normal({6, 9}).transposed(), 0.5, true, 99, 5},
      {"p=0.1 strided", normal({5, 11}).strided(), 0.1, true, 7, 3},
      {"p=0.9 3-d", normal({3, 4, 5}), 0.9, true, 2024, 1},
      {"p=0.2 large", normal({37, 129}), 0.2, true, 31337, 12},
      {"p=0 identity", normal({4, 5}), 0.0, true, 1, 0},
      {"eval identity", normal({3, 6}).transposed(), 0.5, false, 1, 0},
      {"p=1 zeros", normal({4, 3}), 1.0, true, 1, 0},
  };
  for (const DropoutSpec& s : specs) dropout_case(s);
}

}  // namespace trident::testing
