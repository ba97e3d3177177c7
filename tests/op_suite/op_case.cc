#include "op_case.h"

namespace trident::testing {

InputSpec normal(const Shape& shape) { return InputSpec{.shape = shape}; }

InputSpec uniform(const Shape& shape, double low, double high) {
  return InputSpec{.shape = shape, .kind = InputKind::kUniform, .low = low, .high = high};
}

InputSpec index(const Shape& shape, int64_t high, DType dtype) {
  return InputSpec{.shape = shape,
                   .kind = InputKind::kIndex,
                   .high = static_cast<double>(high),
                   .index_dtype = dtype,
                   .differentiable = false};
}

InputSpec q8_0_grid(const Shape& shape) { return InputSpec{.shape = shape, .kind = InputKind::kQ8_0Grid}; }

static std::vector<OpCase>& case_list() {
  static std::vector<OpCase>* cases = new std::vector<OpCase>();
  return *cases;
}

void add_case(OpCase c) { case_list().push_back(std::move(c)); }
const std::vector<OpCase>& all_cases() { return case_list(); }

bool register_cases(void (*fn)()) {
  fn();
  return true;
}

}  // namespace trident::testing
