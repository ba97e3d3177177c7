// The op registry's test side: every differentiable op registers cases here, and one generic
// runner (op_suite_test.cc) checks each case:
//   1. forward, for each dtype of the case, against the float64 reference (src/kernels/reference);
//   2. backward, for each dtype, against trident's own float64 backward on the same values;
//   3. the float64 backward against 4-point central finite differences of the reference;
//   4. bitwise-identical results with 1 and 2 threads (deterministic ops);
//   5. the profiler (core/profiler.h) times its forward and backward under its name.
// Tolerances come from the dtype's unit roundoff and the case's reduction length only
// (docs/numerics.md); nothing is tuned per case. A registered op with no case fails
// OpSuiteCoverage.EveryRegisteredOpHasACase.
//
// Cases are registered from cases_<family>.cc files:
//   TRI_OP_CASES(linalg_cases) {
//     add_case(OpCase("matmul", "batched (2,3,4)@(2,4,5)")
//                  .input(normal({2, 3, 4})).input(normal({2, 4, 5}))
//                  .forward([](const TensorList& x) { return TensorList{trident::matmul(x[0], x[1])}; })
//                  .reference([](const Arrays& x) { return Arrays{reference::matmul(x[0], x[1])}; })
//                  .reduction_length(4).dtypes({DType::kF32, DType::kBF16}));
//   }
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/reference/array.h"

namespace trident::testing {

using Arrays = std::vector<reference::Array>;

enum class InputKind {
  kNormal,   // N(0, 1)
  kUniform,  // U[low, high): e.g. strictly positive inputs for log, sqrt, a divisor
  kIndex,    // integers in [0, high) of an index dtype; never differentiated
  // Values on GGUF's Q8_0 grid along the last dim (a multiple of 32): q / 64, q an integer in
  // [-127, 127], each block of 32 holding a +-127, so rounding x to Q8_0 blocks (what decode's
  // int8/int4 products do, Note [Integer dot products at decode]) changes nothing and the
  // plain product is the reference for every dtype (7 significant bits: exact in bf16 and f16).
  kQ8_0Grid,
};

enum class Layout {
  kContiguous,
  kTransposed,  // stored with the last two dims swapped, then viewed back: non-contiguous
  kStrided,     // every other element of a twice-as-long last dim: non-unit stride
  kBroadcast,   // a size-1 leading dim expanded (stride 0) to `broadcast_to`
};

struct InputSpec {
  Shape shape;
  InputKind kind = InputKind::kNormal;
  double low = 0.0, high = 1.0;  // kUniform range; kIndex uses [0, high)
  DType index_dtype = DType::kI64;
  Layout layout = Layout::kContiguous;
  int64_t broadcast_to = 0;      // kBroadcast: the expanded size of dim 0 (shape[0] is 1)
  bool differentiable = true;

  InputSpec& transposed() { layout = Layout::kTransposed; return *this; }
  InputSpec& strided() { layout = Layout::kStrided; return *this; }
  InputSpec& broadcast(int64_t n) { layout = Layout::kBroadcast; broadcast_to = n; return *this; }
  InputSpec& no_grad() { differentiable = false; return *this; }
};

InputSpec normal(const Shape& shape);
InputSpec uniform(const Shape& shape, double low, double high);
InputSpec index(const Shape& shape, int64_t high, DType dtype = DType::kI64);
InputSpec q8_0_grid(const Shape& shape);

using ForwardFn = std::function<TensorList(const TensorList&)>;
using ReferenceFn = std::function<Arrays(const Arrays&)>;

class OpCase {
 public:
  OpCase(std::string op, std::string name) : op_(std::move(op)), name_(std::move(name)) {}

  OpCase&& input(InputSpec spec) && { inputs_.push_back(std::move(spec)); return std::move(*this); }
  OpCase&& forward(ForwardFn fn) && { forward_ = std::move(fn); return std::move(*this); }
  OpCase&& reference(ReferenceFn fn) && { reference_ = std::move(fn); return std::move(*this); }
  // The longest sum (or chain of dependent roundings) behind one output or gradient element.
  OpCase&& reduction_length(int64_t k) && { reduction_length_ = k; return std::move(*this); }
  // Storage dtypes to check besides f64 (default: f32).
  OpCase&& dtypes(std::vector<DType> d) && { dtypes_ = std::move(d); return std::move(*this); }
  // Ops whose results may legitimately differ with the thread count opt out of check 4.
  OpCase&& nondeterministic() && { deterministic_ = false; return std::move(*this); }
  // For ops that are not differentiable in some input sense (e.g. outputs only indices).
  OpCase&& no_backward() && { check_backward_ = false; return std::move(*this); }
  // For ops whose kernels are the host's only (int8/int4 weights): the device runs skip.
  OpCase&& on_host_only() && { host_only_ = true; return std::move(*this); }

  const std::string& op() const { return op_; }
  const std::string& name() const { return name_; }
  const std::vector<InputSpec>& inputs() const { return inputs_; }
  const ForwardFn& forward_fn() const { return forward_; }
  const ReferenceFn& reference_fn() const { return reference_; }
  int64_t reduction_length() const { return reduction_length_; }
  const std::vector<DType>& dtypes() const { return dtypes_; }
  bool deterministic() const { return deterministic_; }
  bool check_backward() const { return check_backward_; }
  bool host_only() const { return host_only_; }

 private:
  std::string op_, name_;
  std::vector<InputSpec> inputs_;
  ForwardFn forward_;
  ReferenceFn reference_;
  int64_t reduction_length_ = 1;
  std::vector<DType> dtypes_ = {DType::kF32};
  bool deterministic_ = true;
  bool check_backward_ = true;
  bool host_only_ = false;
};

void add_case(OpCase c);
// Every case, in the order of the names of the files that register them (then of their lines),
// whatever the order of static initialization: that is the link order, which the build decides
// (CMake's unity batches link in reverse, Note [Unity test programs] in tests/CMakeLists.txt),
// and a case's index is part of its test's name.
const std::vector<OpCase>& all_cases();
// Records fn, which add_case()s a group of cases, for all_cases() to run (TRI_OP_CASES).
bool register_cases(void (*fn)(), const char* file, int line);

}  // namespace trident::testing

#define TRI_OP_CASES(fn)                                           \
  static void fn();                                                \
  [[maybe_unused]] static const bool fn##_registered =             \
      ::trident::testing::register_cases(&fn, __FILE__, __LINE__); \
  static void fn()
