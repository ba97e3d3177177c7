// Decoding attention (ops::attention_decode, Note [Queries after cached keys] in
// kernels/cpu/attention.h): a few queries against every cached key. Checked against the float64
// reference of full causal attention, whose query rows at the decoded positions must be what
// decoding gives: rows of one batch starting at different positions (caches of different
// lengths), one query and several, across 64-key tiles, with grouped-query attention and a
// sliding window, in f32 and bf16; and one decoding step's row equals the full forward's last
// row bit for bit in f32 (what makes cached greedy generation give uncached generation's tokens).
#include <gtest/gtest.h>

#include <cmath>

#include "core/copy.h"
#include "core/factory.h"
#include "core/rng.h"
#include "core/views.h"
#include "kernels/reference/attention.h"
#include "ops/attention.h"
#include "ops/expect_error.h"

namespace trident {
namespace {

reference::Array array_of(const Tensor& t) {
  reference::Array a(t.shape());
  a.data = to_vector<double>(t);
  return a;
}

struct DecodeCase {
  int64_t B, NH, NKV, T, Tq, HS, window;
  std::vector<int64_t> starts;  // per row; empty: the last Tq positions
};

// Worst |decode - reference| over the decoded rows, relative to the reference's largest value.
double decode_error(const DecodeCase& c, DType dtype) {
  Generator gen(42);
  const Tensor k = randn({c.B, c.NKV, c.T, c.HS}, gen), v = randn({c.B, c.NKV, c.T, c.HS}, gen);
  const Tensor q_full = randn({c.B, c.NH, c.T, c.HS}, gen);
  std::vector<int64_t> starts = c.starts;
  if (starts.empty()) starts.assign(static_cast<size_t>(c.B), c.T - c.Tq);
  // The decoded queries: rows [start, start + Tq) of q_full, row by row.
  Tensor q = zeros({c.B, c.NH, c.Tq, c.HS});
  for (int64_t b = 0; b < c.B; ++b)
    core::copy_(views::narrow(q, 0, b, 1),
          views::narrow(views::narrow(q_full, 0, b, 1), 2, starts[static_cast<size_t>(b)], c.Tq));
  const Tensor start_t = from_vector(starts, {c.B});
  const ops::AttentionForward got = ops::attention_decode(core::cast(q, dtype), core::cast(k, dtype), core::cast(v, dtype),
                                                          &start_t, c.window);
  // The reference from the inputs as rounded to dtype.
  auto rounded = [&](const Tensor& t) { return array_of(core::cast(core::cast(t, dtype), DType::kF64)); };
  const reference::Array want = reference::attention(rounded(q_full), rounded(k), rounded(v), true, std::nullopt,
                                                     c.window);
  const std::vector<double> out = to_vector<double>(got.out);
  double worst = 0, size = 0;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.NH; ++h)
      for (int64_t i = 0; i < c.Tq; ++i)
        for (int64_t d = 0; d < c.HS; ++d) {
          const double r = want.data[static_cast<size_t>(((b * c.NH + h) * c.T + starts[static_cast<size_t>(b)] + i) * c.HS + d)];
          worst = std::max(worst, std::abs(out[static_cast<size_t>(((b * c.NH + h) * c.Tq + i) * c.HS + d)] - r));
          size = std::max(size, std::abs(r));
        }
  return worst / size;
}

TEST(AttentionDecode, MatchesTheFullAttentionsRowsAtTheirPositions) {
  const DecodeCase cases[] = {
      {2, 2, 2, 37, 1, 16, 0, {}},                 // one step, the last position
      {3, 4, 2, 130, 1, 8, 0, {5, 64, 129}},       // caches of 6, 65 and 130 keys in one batch
      {2, 4, 2, 150, 3, 16, 0, {0, 100}},          // three queries, GQA
      {2, 2, 1, 200, 70, 8, 0, {30, 130}},         // a prefill-sized chunk after a cache
      {2, 2, 2, 130, 2, 8, 20, {60, 128}},         // a sliding window
      {1, 2, 2, 1, 1, 8, 0, {}},                   // the first token
  };
  for (const DecodeCase& c : cases) {
    const std::string name = "B" + std::to_string(c.B) + " T" + std::to_string(c.T) + " Tq" + std::to_string(c.Tq);
    EXPECT_LT(decode_error(c, DType::kF32), 2e-6) << name;
    EXPECT_LT(decode_error(c, DType::kBF16), 2e-2) << name;
  }
}

TEST(AttentionDecode, OneStepEqualsTheFullForwardsLastRowBitForBit) {
  Generator gen(3);
  const int64_t B = 2, NH = 4, NKV = 2, T = 100, HS = 16;
  const Tensor q = randn({B, NH, T, HS}, gen), k = randn({B, NKV, T, HS}, gen), v = randn({B, NKV, T, HS}, gen);
  const Tensor full = ops::attention(q, k, v, true).out;
  const Tensor last_q = core::contiguous(views::narrow(q, 2, T - 1, 1));
  const Tensor step = ops::attention_decode(last_q, k, v).out;
  EXPECT_EQ(to_vector<float>(step), to_vector<float>(core::contiguous(views::narrow(full, 2, T - 1, 1))));
}

TEST(AttentionDecode, BadQueriesAreNamed) {
  const Tensor q = zeros({2, 2, 3, 8}), kv = zeros({2, 2, 5, 8});
  expect_error([&] { ops::attention_decode(zeros({2, 2, 6, 8}), kv, kv); },
               {"attention_decode", "more queries", "(2, 2, 6, 8)", "(2, 2, 5, 8)"});
  const Tensor starts = from_vector(std::vector<int64_t>{0, 3}, {2});
  expect_error([&] { ops::attention_decode(q, kv, kv, &starts); },
               {"attention_decode", "row 1's queries start at key position 3", "3 queries", "5 keys"});
  const Tensor wrong = from_vector(std::vector<int64_t>{0}, {1});
  expect_error([&] { ops::attention_decode(q, kv, kv, &wrong); }, {"attention_decode", "query_start must be (B) = (2)"});
}

}  // namespace
}  // namespace trident
