#include "op_case.h"

#include <algorithm>

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

namespace {

struct CaseGroup {
  std::string file;
  int line;
  void (*fn)();
};

std::vector<CaseGroup>& case_groups() {
  static std::vector<CaseGroup>* groups = new std::vector<CaseGroup>();
  return *groups;
}

}  // namespace

void add_case(OpCase c) { case_list().push_back(std::move(c)); }

const std::vector<OpCase>& all_cases() {
  static const bool added = [] {
    std::vector<CaseGroup> groups = case_groups();
    std::sort(groups.begin(), groups.end(), [](const CaseGroup& a, const CaseGroup& b) {
      return a.file != b.file ? a.file < b.file : a.line < b.line;
    });
    for (const CaseGroup& g : groups) g.fn();
    return true;
  }();
  (void)added;
  return case_list();
}

bool register_cases(void (*fn)(), const char* file, int line) {
  case_groups().push_back({file, line, fn});
  return true;
}

}  // namespace trident::testing
