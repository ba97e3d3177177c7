// Op-suite cases: cross_entropy with awkward and large vocabularies, rows split over several
// logsumexp chunks and several parallel chunks, ignored targets, every target dtype, mean and
// sum reductions, non-contiguous logits and targets; f32 and bf16 logits (f32 math).
#include "autograd/functions.h"
#include "core/factory.h"
#include "kernels/reference/linalg.h"
#include "kernels/reference/loss.h"
#include "op_case.h"

namespace trident::testing {
namespace {

const std::vector<DType> kLossTypes = {DType::kF32, DType::kBF16};

struct Targets {
  InputSpec spec;
  int64_t ignore_index = -1;
  int64_t ignore_every = 0;  // > 0: targets at positions 0, k, 2k, ... become ignore_index
};

// Marks every `every`-th target as ignored, deterministically, keeping the dtype.
Tensor mark_ignored(const Tensor& targets, int64_t every, int64_t ignore_index) {
  std::vector<int64_t> values = to_vector<int64_t>(targets);
  for (size_t i = 0; i < values.size(); i += static_cast<size_t>(every)) values[i] = ignore_index;
  return core::to_device(core::cast(from_vector(values, targets.shape()), targets.dtype()), targets.device());
}
reference::Array mark_ignored(reference::Array targets, int64_t every, int64_t ignore_index) {
  for (int64_t i = 0; i < targets.numel(); i += every)
    targets[i] = static_cast<double>(ignore_index);
  return targets;
}

void cross_entropy_case(std::string name, InputSpec logits, Targets t, Reduction reduction) {
  const int64_t V = logits.shape[logits.shape.size() - 1], N = logits.shape.product() / V;
  const int64_t ignore_index = t.ignore_index, every = t.ignore_every;
  const bool mean = reduction == Reduction::kMean;
  add_case(OpCase("cross_entropy", std::move(name))
               .input(std::move(logits))
               .input(std::move(t.spec))
               .forward([=](const TensorList& x) {
                 const Tensor targets = every ? mark_ignored(x[1], every, ignore_index) : x[1];
                 return TensorList{trident::cross_entropy(x[0], targets, ignore_index, reduction)};
               })
               .reference([=](const Arrays& x) {
                 const reference::Array targets =
                     every ? mark_ignored(x[1], every, ignore_index) : x[1];
                 return Arrays{reference::cross_entropy(x[0], targets, ignore_index, mean)};
               })
               // The loss sums N rows, each a logsumexp over V exponentials: N * V rounded
               // terms behind the one output (each gradient element needs only its row's V).
               .reduction_length(N * V)
               .dtypes(kLossTypes));
}

// linear_cross_entropy(x, w, targets) against cross_entropy(linear(x, w)) in float64.
void linear_cross_entropy_case(std::string name, int64_t N, int64_t C, int64_t V, Targets t, Reduction reduction,
                               int64_t chunk_rows, bool transposed_x = false) {
  const int64_t ignore_index = t.ignore_index, every = t.ignore_every;
  const bool mean = reduction == Reduction::kMean;
  InputSpec x = normal({N, C});
  if (transposed_x) x.transposed();
  add_case(OpCase("linear_cross_entropy", std::move(name))
               .input(std::move(x))
               .input(normal({V, C}))
               .input(std::move(t.spec))
               .forward([=](const TensorList& in) {
                 const Tensor targets = every ? mark_ignored(in[2], every, ignore_index) : in[2];
                 return TensorList{
                     trident::linear_cross_entropy(in[0], in[1], targets, ignore_index, reduction, chunk_rows)};
               })
               .reference([=](const Arrays& in) {
                 const reference::Array targets = every ? mark_ignored(in[2], every, ignore_index) : in[2];
                 return Arrays{reference::cross_entropy(reference::linear(in[0], in[1], std::nullopt), targets,
                                                        ignore_index, mean)};
               })
               // The loss: N rows of V exponentials of length-C products; dw sums over N rows.
               .reduction_length(N * V * C)
               .dtypes(kLossTypes));
}

}  // namespace

TRI_OP_CASES(linear_cross_entropy_cases) {
  const Reduction kMean = Reduction::kMean, kSum = Reduction::kSum;
  linear_cross_entropy_case("one chunk", 12, 8, 37, {index({12}, 37)}, kMean, 0);
  linear_cross_entropy_case("chunks of 5 rows, ignored targets", 23, 8, 37, {index({23}, 37), -1, 4}, kMean, 5);
  linear_cross_entropy_case("chunks of 7, sum, u16", 30, 6, 50, {index({30}, 50, DType::kU16)}, kSum, 7);
  linear_cross_entropy_case("transposed x, chunks of 4", 10, 9, 17, {index({10}, 17, DType::kI32)}, kMean, 4, true);
  // Vocabularies of thousands of classes (GPT-2's among them) in chunks, with a tail after the
  // rows' whole 16-byte vectors and ignored rows: the GPU's padded logits rows and its
  // block-per-row cross-entropy kernels over many vectors per thread.
  linear_cross_entropy_case("V 3001, chunks of 3", 7, 4, 3001, {index({7}, 3001), -1, 3}, kMean, 3);
  linear_cross_entropy_case("V 20011, sum", 5, 4, 20011, {index({5}, 20011, DType::kI32)}, kSum, 0);
  linear_cross_entropy_case("GPT-2's V 50257, chunks of 4", 6, 4, 50257, {index({6}, 50257), -1, 5}, kMean, 4);
}

TRI_OP_CASES(loss_cases) {
  const Reduction kMean = Reduction::kMean, kSum = Reduction::kSum;
  cross_entropy_case("(16,61) i64 mean", normal({16, 61}), {index({16}, 61, DType::kI64)}, kMean);
  cross_entropy_case("(16,61) i32 sum", normal({16, 61}), {index({16}, 61, DType::kI32)}, kSum);
  cross_entropy_case("(16,61) u16 mean", normal({16, 61}), {index({16}, 61, DType::kU16)}, kMean);
  cross_entropy_case("(16,61) i64 every 4th ignored mean", normal({16, 61}),
                     {index({16}, 61, DType::kI64), -1, 4}, kMean);
  cross_entropy_case("(12,61) i32 every 3rd ignored sum", normal({12, 61}),
                     {index({12}, 61, DType::kI32), -1, 3}, kSum);
  cross_entropy_case("(12,61) u16 ignore_index 65535 mean", normal({12, 61}),
                     {index({12}, 61, DType::kU16), 65535, 5}, kMean);
  cross_entropy_case("(9,61) ignore_index inside [0, V) mean", normal({9, 61}),
                     {index({9}, 61, DType::kI64), 7, 2}, kMean);
  cross_entropy_case("(4,1000) large V mean", normal({4, 1000}), {index({4}, 1000)}, kMean);
  cross_entropy_case("(3,5000) several chunks per row sum", normal({3, 5000}), {index({3}, 5000)},
                     kSum);
  cross_entropy_case("(300,257) several row chunks mean", normal({300, 257}),
                     {index({300}, 257, DType::kI32), -1, 7}, kMean);
  cross_entropy_case("(2,3,29) 3-D logits mean", normal({2, 3, 29}), {index({2, 3}, 29)}, kMean);
  cross_entropy_case("(8,61) transposed logits mean", normal({8, 61}).transposed(),
                     {index({8}, 61)}, kMean);
  cross_entropy_case("(5,33) strided logits and targets sum", normal({5, 33}).strided(),
                     {index({5}, 33, DType::kI32).strided()}, kSum);
  cross_entropy_case("(6,50) large logits mean", uniform({6, 50}, -40.0, 40.0), {index({6}, 50)},
                     kMean);
  cross_entropy_case("(5,1) one class mean", normal({5, 1}), {index({5}, 1)}, kMean);
}

}  // namespace trident::testing
