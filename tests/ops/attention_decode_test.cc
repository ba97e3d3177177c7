// Decoding attention (ops::attention_decode, Note [Queries after cached keys] in
// kernels/cpu/attention.h): a few queries against every cached key. Checked against the float64
// reference of full causal attention, whose query rows at the decoded positions must be what
// decoding gives: rows of one batch starting at different positions (caches of different
// lengths), one query and several, across 64-key tiles, with grouped-query attention and a
// sliding window, in f32 and bf16; and one decoding step's row equals the full forward's last
// row bit for bit in f32 (what makes cached greedy generation give uncached generation's tokens).
// The paged form (a KV cache in blocks, Note [Paged keys and values]) gives the contiguous
// form's bits from scattered blocks, with a window's given-back blocks never read.
#include <gtest/gtest.h>

#include <cmath>

#include "core/copy.h"
#include "core/factory.h"
#include "core/rng.h"
#include "core/views.h"
#include "kernels/cpu/attention.h"
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

// The decode-shaped path (Tq <= kDecodeQueries, Note [Decode-shaped attention]) in f32 and f64
// against the float64 reference: grouped-query heads (3 and 4 per kv head), rows of different
// lengths, several queries after a cache, a sliding window, head sizes that are and are not a
// multiple of the vector width. f64 must agree to f64 rounding: it shows the path computes
// attention, not just the tiled path's rounding of it.
TEST(AttentionDecode, FewQueriesMatchTheFloat64Reference) {
  const DecodeCase cases[] = {
      {3, 6, 2, 200, 1, 64, 0, {0, 77, 199}},      // GQA 3, one query, caches of 1, 78 and 200 keys
      {2, 8, 2, 150, 4, 16, 0, {3, 140}},          // GQA 4, four queries
      {2, 4, 4, 190, 16, 24, 0, {100, 174}},       // kDecodeQueries queries, HS not a multiple of 16
      {2, 6, 3, 260, 5, 8, 45, {60, 250}},         // a sliding window across tiles
      {1, 2, 1, 64, 2, 32, 0, {62}},               // the last keys of one full tile
  };
  for (const DecodeCase& c : cases) {
    const std::string name = "B" + std::to_string(c.B) + " T" + std::to_string(c.T) + " Tq" + std::to_string(c.Tq);
    EXPECT_LT(decode_error(c, DType::kF64), 1e-13) << name;
    EXPECT_LT(decode_error(c, DType::kF32), 2e-6) << name;
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

// Row b's keys (NKV, T, HS) scattered over a pool of 64-token blocks in the order `order`
// (a permutation, so rows interleave); blocks before `dropped[b]` tokens are given back (-1).
struct Paged {
  Tensor k_pool, v_pool, table;
};
Paged scatter(const Tensor& k, const Tensor& v, const std::vector<int64_t>& order, const std::vector<int64_t>& dropped) {
  const int64_t B = k.size(0), NKV = k.size(1), T = k.size(2), HS = k.size(3), bt = 64, per_row = (T + bt - 1) / bt;
  Paged p{zeros({B * per_row, NKV, bt, HS}, k.dtype()), zeros({B * per_row, NKV, bt, HS}, k.dtype()),
          full({B, per_row}, -1.0, DType::kI64)};
  int64_t* table = p.table.data_ptr<int64_t>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < per_row; ++i) {
      const int64_t block = order[static_cast<size_t>(b * per_row + i)], n = std::min(bt, T - i * bt);
      if ((i + 1) * bt <= dropped[static_cast<size_t>(b)]) continue;
      table[b * per_row + i] = block;
      for (auto [pool, src] : {std::pair{&p.k_pool, &k}, std::pair{&p.v_pool, &v}})
        core::copy_(views::narrow(views::select(*pool, 0, block), 1, 0, n),
                    views::narrow(views::select(*src, 0, b), 1, i * bt, n));
    }
  return p;
}

TEST(AttentionDecode, PagedBlocksGiveTheContiguousCachesBits) {
  Generator gen(7);
  const int64_t B = 3, NH = 4, NKV = 2, T = 200, HS = 16;
  const std::vector<int64_t> order = {11, 0, 5, 2, 7, 9, 1, 4, 10, 3, 8, 6};  // 3 rows x 4 blocks
  for (DType dtype : {DType::kF32, DType::kBF16})
    for (int64_t window : {int64_t{0}, int64_t{70}}) {
      const Tensor k = core::cast(randn({B, NKV, T, HS}, gen), dtype), v = core::cast(randn({B, NKV, T, HS}, gen), dtype);
      const std::vector<int64_t> starts = {10, 130, 199};  // caches of 11, 131 and 200 keys
      const Tensor q = core::cast(randn({B, NH, 1, HS}, gen), dtype), start_t = from_vector(starts, {B});
      // With the window, every block wholly before a row's window is given back.
      std::vector<int64_t> dropped(B, 0);
      if (window > 0)
        for (int64_t b = 0; b < B; ++b) dropped[static_cast<size_t>(b)] = starts[static_cast<size_t>(b)] - window + 1;
      const Paged p = scatter(k, v, order, dropped);
      const Tensor want = ops::attention_decode(q, k, v, &start_t, window).out;
      const Tensor got = ops::attention_decode(q, p.k_pool, p.v_pool, {p.table, T}, start_t, window).out;
      EXPECT_EQ(to_vector<float>(got), to_vector<float>(want)) << dtype_name(dtype) << " window " << window;
    }
}

// The decode-shaped path gives the tiled path's bits (Note [The tiled path's bits]): each query
// of a call with at most kDecodeQueries queries equals the same query of a call with one more
// (the tiled path) over the same keys, output and logsumexp, from contiguous and paged caches.
TEST(AttentionDecode, FewQueriesGiveTheTiledPathsBits) {
  constexpr int64_t kTiled = kernels::cpu::kDecodeQueries + 1;
  struct BitsCase {
    int64_t B, NH, NKV, T, HS, window;
    std::vector<int64_t> starts;  // of the tiled call's kTiled queries, per row
  };
  const BitsCase cases[] = {
      {3, 12, 12, 200, 64, 0, {0, 100, 183}},  // GPT-2's heads, rows of 17, 117 and 200 keys
      {2, 12, 4, 230, 64, 0, {40, 213}},       // LLaMA's grouped heads
      {2, 6, 2, 200, 16, 50, {90, 183}},       // a sliding window; HS below the vector block
      {1, 4, 2, 150, 40, 70, {133}},           // HS = 40: P V's columns padded
  };
  const std::pair<int64_t, int64_t> subsets[] = {{0, 1}, {kTiled - 1, 1}, {5, 3}, {1, kTiled - 1}};  // (first, Tq)
  Generator gen(11);
  for (const BitsCase& c : cases)
    for (DType dtype : {DType::kF32, DType::kF64}) {
      const std::string name = std::string(dtype_name(dtype)) + " NH" + std::to_string(c.NH) + " NKV" +
                               std::to_string(c.NKV) + " HS" + std::to_string(c.HS) + " window " + std::to_string(c.window);
      const Tensor k = core::cast(randn({c.B, c.NKV, c.T, c.HS}, gen), dtype);
      const Tensor v = core::cast(randn({c.B, c.NKV, c.T, c.HS}, gen), dtype);
      const Tensor q = core::cast(randn({c.B, c.NH, kTiled, c.HS}, gen), dtype);
      const Tensor starts = from_vector(c.starts, {c.B});
      const ops::AttentionForward tiled = ops::attention_decode(q, k, v, &starts, c.window);
      // A paged copy of the cache, blocks in reverse order, a window's passed blocks given back.
      const int64_t per_row = (c.T + 63) / 64;
      std::vector<int64_t> order(static_cast<size_t>(c.B * per_row)), dropped(static_cast<size_t>(c.B), 0);
      for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(order.size() - 1 - i);
      if (c.window > 0)
        for (size_t b = 0; b < dropped.size(); ++b) dropped[b] = c.starts[b] - c.window + 1;
      const Paged p = scatter(k, v, order, dropped);
      for (auto [first, Tq] : subsets) {
        const Tensor q_few = core::contiguous(views::narrow(q, 2, first, Tq));
        std::vector<int64_t> few_starts = c.starts;
        for (int64_t& start : few_starts) start += first;
        const Tensor few_start_t = from_vector(few_starts, {c.B});
        const Tensor want = core::contiguous(views::narrow(tiled.out, 2, first, Tq));
        const Tensor want_lse = core::contiguous(views::narrow(tiled.lse, 2, first, Tq));
        const ops::AttentionForward contiguous = ops::attention_decode(q_few, k, v, &few_start_t, c.window);
        const ops::AttentionForward paged =
            ops::attention_decode(q_few, p.k_pool, p.v_pool, {p.table, c.T}, few_start_t, c.window);
        const std::string at = name + " queries " + std::to_string(first) + "+" + std::to_string(Tq);
        EXPECT_EQ(to_vector<double>(contiguous.out), to_vector<double>(want)) << at;
        EXPECT_EQ(to_vector<double>(contiguous.lse), to_vector<double>(want_lse)) << at;
        EXPECT_EQ(to_vector<double>(paged.out), to_vector<double>(want)) << at << " (paged)";
        EXPECT_EQ(to_vector<double>(paged.lse), to_vector<double>(want_lse)) << at << " (paged)";
      }
    }
}

TEST(AttentionDecode, BadBlocksAreNamed) {
  const Tensor q = zeros({2, 2, 1, 8}), pool = zeros({4, 2, 64, 8}), starts = from_vector(std::vector<int64_t>{3, 70}, {2});
  const Tensor table = from_vector(std::vector<int64_t>{0, -1, 1, 9}, {2, 2});
  expect_error([&] { ops::attention_decode(q, pool, pool, {table, 71}, starts); },
               {"attention_decode (paged)", "row 1 reads keys 64 to 127 from block 9", "pool's 4"});
  const Tensor dropped = from_vector(std::vector<int64_t>{0, -1, -1, 2}, {2, 2});
  expect_error([&] { ops::attention_decode(q, pool, pool, {dropped, 71}, starts); },
               {"row 1 reads keys 0 to 63 from block -1"});
  const Tensor odd = zeros({4, 2, 48, 8});
  expect_error([&] { ops::attention_decode(q, odd, odd, {table, 71}, starts); },
               {"blocks of 48 tokens", "a multiple of 64"});
  expect_error([&] { ops::attention_decode(q, pool, pool, {table, 200}, starts); },
               {"200 keys per row do not fit 2 blocks of 64 tokens"});
}

}  // namespace
}  // namespace trident
