// Binary ops and copies split their work within rows (kernels/cpu/binary.cc, core/copy.cc): a
// tensor whose dimensions coalesce into one long row, or a few, runs on every thread in pieces
// of a row. Every element still gets the scalar reference's bits, for contiguous operands,
// broadcasts along either dimension, strided views and dtype conversions, with ragged last
// pieces.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/copy.h"
#include "core/factory.h"
#include "core/half.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "core/views.h"
#include "ops/elementwise.h"

namespace trident {
namespace {

class LongRows : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = num_threads();
    set_num_threads(2);
  }
  void TearDown() override { set_num_threads(saved_); }
  int saved_ = 1;
};

// out[i, j] against op(a[i, j], b[i or 0, j or 0]) for (rows, cols) a and b broadcast.
template <class Op>
void expect_elementwise(const Tensor& out, const Tensor& a, const Tensor& b, const Op& op) {
  const int64_t rows = a.size(0), cols = a.size(1);
  const std::vector<float> o = to_vector<float>(out), x = to_vector<float>(core::contiguous(a)),
                           y = to_vector<float>(core::contiguous(b));
  const bool b_rows = b.size(0) == rows, b_cols = b.size(1) == cols;
  int64_t wrong = 0;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const float want = op(x[static_cast<size_t>(i * cols + j)],
                            y[static_cast<size_t>((b_rows ? i : 0) * b.size(1) + (b_cols ? j : 0))]);
      if (o[static_cast<size_t>(i * cols + j)] != want && ++wrong <= 3)
        ADD_FAILURE() << "element (" << i << ", " << j << "): " << o[static_cast<size_t>(i * cols + j)]
                      << ", want " << want;
    }
  EXPECT_EQ(wrong, 0);
}

TEST_F(LongRows, BinaryOpsGiveTheScalarBitsInEveryPiece) {
  Generator gen(11);
  // 5 x 70001 contiguous coalesces into one row of 350005: 22 pieces, the last short.
  const Tensor a = randn({5, 70001}, gen), b = randn({5, 70001}, gen);
  expect_elementwise(ops::add(a, b), a, b, [](float x, float y) { return x + y; });
  // A row broadcast over 5 rows of 70001 (5 pieces a row); a column broadcast along rows.
  const Tensor row = randn({1, 70001}, gen), column = randn({5, 1}, gen);
  expect_elementwise(ops::mul(a, row), a, row, [](float x, float y) { return x * y; });
  expect_elementwise(ops::div(a, column), a, column, [](float x, float y) { return x / y; });
  // A transposed view: strided inner loops.
  const Tensor strided = views::transpose(randn({70001, 5}, gen), 0, 1);
  expect_elementwise(ops::sub(strided, b), strided, b, [](float x, float y) { return x - y; });
}

TEST_F(LongRows, CopiesGiveTheScalarBitsInEveryPiece) {
  Generator gen(12);
  const Tensor a = randn({3, 100003}, gen);  // one row of 300009: 10 pieces of 32768 and a tail
  const std::vector<float> x = to_vector<float>(a);
  const Tensor rounded = core::cast(a, DType::kBF16);
  const bf16* bits = rounded.data_ptr<bf16>();
  int64_t wrong = 0;
  for (size_t i = 0; i < x.size(); ++i) wrong += bits[i].bits != bf16::round_from_float(x[i]);
  EXPECT_EQ(wrong, 0) << "of " << x.size() << " bf16 roundings";
  // A transposed copy: strided reads, 3 elements a row.
  const Tensor columns = core::contiguous(views::transpose(a, 0, 1));
  const std::vector<float> c = to_vector<float>(columns);
  for (int64_t j = 0; j < 100003; j += 9973)
    for (int64_t i = 0; i < 3; ++i)
      ASSERT_EQ(c[static_cast<size_t>(j * 3 + i)], x[static_cast<size_t>(i * 100003 + j)]) << j << ", " << i;
}

}  // namespace
}  // namespace trident
