// Embedding front end: error messages, the gradient of repeated indices, and the backward's
// determinism on a GPT-2-sized lookup (1 vs 2 threads, and equality with a sequential
// scatter-add).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "autograd/functions.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "ops/embedding.h"
#include "ops/expect_error.h"

namespace trident {
namespace {

TEST(EmbeddingOp, OutOfRangeIndexNamesValuePositionAndRows) {
  const Tensor w = zeros({4, 3});
  const Tensor idx = from_vector<int64_t>({0, 2, 3, 1, 7, 9}, {2, 3});
  expect_error([&] { ops::embedding(w, idx); },
               {"embedding", "index 7", "position (1, 1)", "(2, 3)", "4 rows", "0 <= index < 4"});
  const Tensor negative = from_vector<int32_t>({1, -2}, {2});
  expect_error([&] { ops::embedding(w, negative); }, {"index -2", "position (1,)"});
}

TEST(EmbeddingOp, RejectsNonIntegerIndicesAndNonMatrixWeights) {
  expect_error([&] { ops::embedding(zeros({4, 3}), zeros({2})); },
               {"embedding", "indices must be i32, i64 or u16", "f32"});
  expect_error([&] { ops::embedding(zeros({4}), from_vector<int64_t>({0}, {1})); },
               {"embedding", "weight must be 2-D", "(4,)"});
  expect_error([&] { ops::embedding(zeros({4, 3}, DType::kI64), from_vector<int64_t>({0}, {1})); },
               {"embedding"});
}

TEST(EmbeddingOp, BackwardChecksGradientShape) {
  const Tensor idx = from_vector<int64_t>({0, 1}, {2});
  expect_error([&] { ops::embedding_backward(zeros({3, 5}), idx, 4); },
               {"embedding_backward", "(3, 5)", "(2,)"});
}

TEST(EmbeddingOp, RepeatedIndicesSumTheirGradients) {
  Tensor w = from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  w.set_requires_grad(true);
  const Tensor idx = from_vector<uint16_t>({2, 0, 2, 2}, {2, 2});
  const Tensor out = embedding(w, idx);
  EXPECT_EQ(to_vector<float>(out), (std::vector<float>{5, 6, 1, 2, 5, 6, 5, 6}));
  autograd::backward({out}, {from_vector<float>({1, 10, 2, 20, 3, 30, 4, 40}, {2, 2, 2})});
  // Row 0: token 1. Row 1: unused. Row 2: tokens 0, 2, 3.
  EXPECT_EQ(to_vector<float>(*w.grad()), (std::vector<float>{2, 20, 0, 0, 8, 80}));
}

// GPT-2 small: 50257 x 768 table, 8192 tokens (8 sequences of 1024).
TEST(EmbeddingOp, Gpt2SizedBackwardIsDeterministicAndMatchesSequentialScatterAdd) {
  constexpr int64_t V = 50257, C = 768, N = 8192;
  Generator gen(5);
  // A skewed token distribution: half the tokens from the first 100 rows (frequent words).
  Tensor idx = randint(0, V, {N}, gen, DType::kI32);
  const Tensor frequent = randint(0, 100, {N / 2}, gen, DType::kI32);
  std::copy_n(frequent.data_ptr<int32_t>(), N / 2, idx.data_ptr<int32_t>());
  const Tensor grad = randn({N, C}, gen);

  const int saved = num_threads();
  set_num_threads(1);
  const Tensor one = ops::embedding_backward(grad, idx, V);
  set_num_threads(2);
  const Tensor two = ops::embedding_backward(grad, idx, V);
  set_num_threads(saved);
  ASSERT_EQ(one.shape(), (Shape{V, C}));
  EXPECT_EQ(std::memcmp(one.data_ptr<float>(), two.data_ptr<float>(), one.nbytes()), 0)
      << "the embedding gradient depends on the thread count";

  // The same bits as adding the tokens' rows one after another, in token order.
  std::vector<float> sequential(static_cast<size_t>(V * C), 0.0f);
  const int32_t* ip = idx.data_ptr<int32_t>();
  const float* gp = grad.data_ptr<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) sequential[ip[n] * C + c] += gp[n * C + c];
  EXPECT_EQ(std::memcmp(one.data_ptr<float>(), sequential.data(), one.nbytes()), 0)
      << "the embedding gradient differs from a sequential scatter-add";
}

}  // namespace
}  // namespace trident
