// Dropout: statistics of the mask, regeneration of the mask in backward, Generator
// consumption, the identity and all-dropped cases, thread-count independence on a large
// tensor, and the error for an invalid p.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "ops/dropout.h"
#include "ops/expect_error.h"

namespace trident {
namespace {

TEST(DropoutOp, KeptFractionAndMeanMatchExpectation) {
  constexpr int64_t n = 1'000'000;
  constexpr double p = 0.1;
  Generator gen(2024);
  Tensor x = empty({n}, DType::kF64);
  uniform_(x, gen, 1.0, 3.0);  // strictly positive: an element is kept iff its output is not 0
  const std::vector<double> in = to_vector<double>(x);
  const std::vector<double> out = to_vector<double>(dropout(x, p, gen));

  int64_t kept = 0;
  double sum_in = 0.0, sum_out = 0.0, sum_out_sq = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    kept += out[i] != 0.0;
    sum_in += in[i];
    sum_out += out[i];
    sum_out_sq += out[i] * out[i];
  }
  // Kept count ~ Binomial(n, 1 - p).
  const double fraction = static_cast<double>(kept) / n;
  const double fraction_sd = std::sqrt(p * (1 - p) / n);
  EXPECT_NEAR(fraction, 1 - p, 5 * fraction_sd);
  // E[out] = E[x]; the sample mean's standard deviation is sd(out) / sqrt(n).
  const double mean_out = sum_out / n, mean_in = sum_in / n;
  const double mean_sd = std::sqrt((sum_out_sq / n - mean_out * mean_out) / n);
  EXPECT_NEAR(mean_out, mean_in, 5 * mean_sd);
  // Kept elements are scaled by exactly 1 / (1 - p).
  for (int64_t i = 0; i < n; i += 9973) {
    if (out[i] != 0.0) {
      EXPECT_DOUBLE_EQ(out[i], in[i] / (1 - p));
    }
  }
}

TEST(DropoutOp, BackwardRegeneratesTheForwardMask) {
  Generator gen(7);
  Tensor x = full({33, 65}, 1.5);  // nonzero, so out != 0 exactly where the mask keeps
  x.set_requires_grad(true);
  const Tensor y = dropout(x, 0.4, gen);
  autograd::backward({y}, {ones(y.shape())});
  const std::vector<float> out = to_vector<float>(y), grad = to_vector<float>(*x.grad());
  const float scale = static_cast<float>(1.0 / 0.6);
  int64_t dropped = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(grad[i], out[i] != 0.0f ? scale : 0.0f) << "element " << i;
    dropped += out[i] == 0.0f;
  }
  EXPECT_GT(dropped, 0);
}

TEST(DropoutOp, EachCallReservesItsCountersAndStateReplays) {
  const Tensor x = ones({10, 7});  // 70 elements: 18 counters
  Generator gen(11);
  const Tensor a = dropout(x, 0.5, gen);
  EXPECT_EQ(gen.offset(), 18u);
  const Tensor b = dropout(x, 0.5, gen);
  EXPECT_EQ(gen.offset(), 36u);
  EXPECT_NE(to_vector<float>(a), to_vector<float>(b)) << "consecutive masks should differ";
  gen.set_state(11, 18);
  EXPECT_EQ(to_vector<float>(dropout(x, 0.5, gen)), to_vector<float>(b));
}

TEST(DropoutOp, IdentityAndAllDroppedDrawNothing) {
  Generator gen(3);
  Tensor x = from_vector<float>({1, -2, 3, NAN}, {2, 2});
  x.set_requires_grad(true);
  for (auto [p, training] : {std::pair{0.0, true}, std::pair{0.5, false}}) {
    const Tensor y = dropout(x, p, gen, training);
    EXPECT_FALSE(y.is_same(x));
    EXPECT_TRUE(y.shares_storage_with(x)) << "the identity should not copy";
    EXPECT_TRUE(y.requires_grad());
  }
  const Tensor zero = dropout(x, 1.0, gen);
  const std::vector<float> z = to_vector<float>(zero);
  EXPECT_EQ(z[0], 0.0f);
  EXPECT_EQ(z[1], 0.0f);
  EXPECT_TRUE(std::isnan(z[3])) << "a NaN input stays NaN, as in PyTorch";
  EXPECT_EQ(gen.offset(), 0u);
}

TEST(DropoutOp, LargeTensorDoesNotDependOnThreadCount) {
  Generator data(1);
  const Tensor x = randn({1000, 1031}, data, DType::kBF16);
  const int saved = num_threads();
  set_num_threads(1);
  const Tensor one = ops::dropout(x, 0.25, 42, 1000);
  set_num_threads(2);
  const Tensor two = ops::dropout(x, 0.25, 42, 1000);
  set_num_threads(saved);
  EXPECT_EQ(to_vector<float>(one), to_vector<float>(two));
}

TEST(DropoutOp, ProbabilityOutsideUnitIntervalIsAnError) {
  Generator gen(0);
  const Tensor x = ones({3});
  for (double p : {-0.1, 1.5, static_cast<double>(NAN)}) {
    std::ostringstream want;
    want << "got " << p;
    SCOPED_TRACE(want.str());
    expect_error([&] { dropout(x, p, gen); },
                 {"dropout: dropout probability p must be in [0, 1]", want.str()});
  }
  EXPECT_EQ(gen.offset(), 0u);
}

}  // namespace
}  // namespace trident
