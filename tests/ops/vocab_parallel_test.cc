// Vocabulary-parallel cross-entropy's local passes (ops/vocab_parallel.h), with the ranks
// simulated in one process: the logits' columns split in uneven shards, each shard's passes
// run, and the cross-shard combination done here (what the all-reduces do between ranks) gives
// the float64 loss and gradient of the whole-vocabulary cross-entropy, ignored rows included;
// on the emulated device the passes give the host's bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/functions.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/rng.h"
#include "core/views.h"
#include "ops/vocab_parallel.h"
#include "support/emulated_device.h"

namespace trident {
namespace {

constexpr int64_t kIgnore = -1;

struct Result {
  double loss = 0.0;
  std::vector<float> grad;  // (N, V) in the whole vocabulary's column order
};

// The passes over shards of `widths` columns on `device`, combined as the ranks' all-reduces.
Result vocab_parallel(const Tensor& logits, const Tensor& targets, const std::vector<int64_t>& widths, Device device) {
  const int64_t N = logits.size(0), V = logits.size(1);
  std::vector<Tensor> shards;
  std::vector<int64_t> begins;
  int64_t at = 0;
  for (int64_t w : widths) {
    shards.push_back(core::to_device(core::contiguous(views::narrow(logits, 1, at, w)), device));
    begins.push_back(at);
    at += w;
  }
  const Tensor t = core::to_device(targets, device);
  std::vector<float> row_max(static_cast<size_t>(N), -INFINITY);
  for (const Tensor& s : shards) {
    const std::vector<float> m = to_vector<float>(ops::vocab_parallel_row_max(s));
    for (int64_t i = 0; i < N; ++i) row_max[i] = std::max(row_max[i], m[i]);
  }
  const Tensor max_t = core::to_device(from_vector(row_max, {N}), device);
  std::vector<double> sums(static_cast<size_t>(2 * N), 0.0);
  for (size_t k = 0; k < shards.size(); ++k) {
    const std::vector<double> s = to_vector<double>(ops::vocab_parallel_sums(shards[k], max_t, t, begins[k]));
    for (size_t i = 0; i < sums.size(); ++i) sums[i] += s[i];
  }
  const std::vector<int64_t> tv = to_vector<int64_t>(targets);
  Result r;
  int64_t count = 0;
  for (int64_t i = 0; i < N; ++i)
    if (tv[i] != kIgnore) {
      ++count;
      r.loss += std::log(sums[i]) - sums[N + i];
    }
  r.loss /= static_cast<double>(count);
  const Tensor sums_t = core::to_device(from_vector(sums, {2, N}), device);
  r.grad.assign(static_cast<size_t>(N * V), 0.0f);
  for (size_t k = 0; k < shards.size(); ++k) {
    const std::vector<float> g = to_vector<float>(
        ops::vocab_parallel_backward(shards[k], max_t, sums_t, t, begins[k], kIgnore, 1.0 / static_cast<double>(count)));
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = 0; j < widths[k]; ++j) r.grad[i * V + begins[k] + j] = g[i * widths[k] + j];
  }
  return r;
}

// The whole-vocabulary mean cross-entropy and its gradient in float64.
Result reference(const Tensor& logits, const Tensor& targets) {
  const int64_t N = logits.size(0), V = logits.size(1);
  const std::vector<float> l = to_vector<float>(logits);
  const std::vector<int64_t> t = to_vector<int64_t>(targets);
  Result r;
  r.grad.assign(static_cast<size_t>(N * V), 0.0f);
  int64_t count = 0;
  for (int64_t i = 0; i < N; ++i) count += t[i] != kIgnore;
  for (int64_t i = 0; i < N; ++i) {
    if (t[i] == kIgnore) continue;
    double m = -INFINITY, s = 0.0;
    for (int64_t j = 0; j < V; ++j) m = std::max(m, static_cast<double>(l[i * V + j]));
    for (int64_t j = 0; j < V; ++j) s += std::exp(l[i * V + j] - m);
    r.loss += (m + std::log(s) - l[i * V + t[i]]) / static_cast<double>(count);
    for (int64_t j = 0; j < V; ++j)
      r.grad[i * V + j] =
          static_cast<float>((std::exp(l[i * V + j] - m) / s - (j == t[i] ? 1.0 : 0.0)) / static_cast<double>(count));
  }
  return r;
}

struct Problem {
  Tensor logits, targets;
};
Problem problem(int64_t N, int64_t V) {
  Generator gen(11);
  Tensor logits = randn({N, V}, gen) * 3.0;
  std::vector<int64_t> t = to_vector<int64_t>(randint(0, V, {N}, gen));
  for (int64_t i = 0; i < N; i += 5) t[i] = kIgnore;
  return {logits, from_vector(t, {N})};
}

TEST(VocabParallelCrossEntropy, ShardsCombineToTheWholeVocabularyLossAndGradient) {
  const Problem p = problem(37, 67);
  const Result want = reference(p.logits, p.targets);
  for (const std::vector<int64_t>& widths :
       std::vector<std::vector<int64_t>>{{67}, {34, 33}, {17, 17, 17, 16}, {1, 66}}) {
    const Result got = vocab_parallel(p.logits, p.targets, widths, Device::cpu());
    EXPECT_NEAR(got.loss, want.loss, 1e-6 * std::abs(want.loss)) << widths.size() << " shards";
    for (size_t k = 0; k < want.grad.size(); ++k)
      ASSERT_NEAR(got.grad[k], want.grad[k], 1e-7) << widths.size() << " shards, element " << k;
  }
}

TEST(VocabParallelCrossEntropy, IgnoredRowsGetNoGradient) {
  const Problem p = problem(10, 9);
  const Result got = vocab_parallel(p.logits, p.targets, {5, 4}, Device::cpu());
  for (int64_t j = 0; j < 9; ++j) EXPECT_EQ(got.grad[j], 0.0f);  // row 0 is ignored
}

TEST(VocabParallelCrossEntropy, OnADeviceThePassesGiveTheHostBits) {
  const Problem p = problem(29, 50);
  const Result host = vocab_parallel(p.logits, p.targets, {26, 24}, Device::cpu());
  const Result dev = vocab_parallel(p.logits, p.targets, {26, 24}, testing::emulated_device());
  EXPECT_EQ(dev.loss, host.loss);
  EXPECT_EQ(dev.grad, host.grad);
}

// The embedding's local ids: each id of rows [begin, begin + rows) maps to its local row with
// mask 1, every other id (below, above, at the edges) to row 0 with mask 0, for any shape of
// ids and any index dtype; the emulated device gives the same.
TEST(VocabParallelEmbedding, LocalIdsAndMaskSplitTheVocabulary) {
  const std::vector<int64_t> ids = {0, 9, 10, 11, 19, 20, 21, 5, 15, 10};
  const std::vector<int64_t> want_local = {0, 0, 0, 1, 9, 0, 0, 0, 5, 0};
  const std::vector<float> want_mask = {0, 0, 1, 1, 1, 0, 0, 0, 1, 1};
  for (const Device device : {Device::cpu(), testing::emulated_device()})
    for (const DType index : {DType::kI64, DType::kI32}) {
      const Tensor t = core::to_device(core::cast(from_vector(ids, {2, 5}), index), device);
      const ops::LocalIds got = ops::vocab_parallel_local_ids(t, 10, 10);
      EXPECT_EQ(got.local.shape(), Shape({2, 5}));
      EXPECT_EQ(got.mask.shape(), Shape({2, 5, 1}));
      EXPECT_EQ(got.local.device(), device);
      std::vector<int64_t> local = to_vector<int64_t>(got.local);
      std::vector<float> mask = to_vector<float>(got.mask);
      // Row 0 of an id from elsewhere is also a valid local row: compare it through the mask.
      EXPECT_EQ(mask, want_mask) << device;
      for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(local[i], want_local[i]) << device << ", id " << ids[i];
    }
}

TEST(VocabParallelCrossEntropy, MismatchedShapesAreClearErrors) {
  const Tensor logits = zeros({4, 6}), targets = zeros({4}, DType::kI64);
  try {
    ops::vocab_parallel_sums(logits, zeros({3}), targets, 0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row_max must be f32 of shape (4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ops::vocab_parallel_row_max(zeros({2, 3, 4})), Error);
  EXPECT_THROW(ops::vocab_parallel_sums(logits, zeros({4}), zeros({5}, DType::kI64), 0), Error);
}

}  // namespace
}  // namespace trident
