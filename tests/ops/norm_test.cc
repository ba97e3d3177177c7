// Normalization front ends: error messages, and the parameter gradients' independence from
// the thread count at a GPT-2-like width with many row blocks.
#include <gtest/gtest.h>

#include <vector>

#include "autograd/functions.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "ops/expect_error.h"
#include "ops/norm.h"

namespace trident {
namespace {

TEST(NormOps, ParameterShapeAndDtypeMismatchesNameBoth) {
  const Tensor x = zeros({4, 8});
  expect_error([&] { ops::layernorm(x, zeros({7}), std::nullopt, 1e-5); },
               {"layernorm", "weight must have shape (8)", "(4, 8)", "(7,)"});
  expect_error(
      [&] {
        ops::layernorm(x, std::nullopt, zeros({2, 4}), 1e-5);
      },
      {"layernorm", "bias must have shape (8)", "(2, 4)"});
  expect_error([&] { ops::layernorm(x, zeros({8}, DType::kBF16), std::nullopt, 1e-5); },
               {"layernorm (weight)", "f32", "bf16"});
  expect_error([&] { ops::rmsnorm(x, zeros({9}), 1e-6); },
               {"rmsnorm", "weight must have shape (8)", "(9,)"});
}

TEST(NormOps, RejectsBadInputsAndEps) {
  expect_error([&] { ops::layernorm(scalar_tensor(1.0), std::nullopt, std::nullopt, 1e-5); },
               {"layernorm", "(..., C)", "0-dim"});
  expect_error(
      [&] {
        ops::rmsnorm(zeros({3, 0}), std::nullopt, 1e-6);
      },
      {"rmsnorm", "last) dim", "(3, 0)", "empty"});
  expect_error(
      [&] {
        ops::rmsnorm(zeros({3, 4}, DType::kI64), std::nullopt, 1e-6);
      },
      {"rmsnorm", "floating", "i64"});
  expect_error(
      [&] {
        ops::layernorm(zeros({3, 4}), std::nullopt, std::nullopt, -1.0);
      },
      {"layernorm", "eps", "-1"});
}

TEST(NormOps, BackwardChecksSavedStatistics) {
  const Tensor x = zeros({4, 8}), dout = zeros({4, 8});
  expect_error(
      [&] {
        ops::layernorm_backward(dout, x, std::nullopt, zeros({4}), zeros({5}), true, false, false);
      },
      {"layernorm_backward", "rstd", "(4,)", "(5,)"});
  expect_error(
      [&] { ops::rmsnorm_backward(dout, x, std::nullopt, zeros({4}, DType::kF64), true, false); },
      {"rmsnorm_backward", "rstd", "f32", "f64"});
  expect_error(
      [&] {
        ops::rmsnorm_backward(zeros({4, 7}), x, std::nullopt, zeros({4}), true, false);
      },
      {"rmsnorm_backward", "(4, 7)", "(4, 8)"});
}

// GPT-2 width, 1000 rows (63 blocks of the parameter-gradient reduction): the same bits for
// any thread count, including counts that do not divide the block count.
TEST(NormOps, ParameterGradientsDoNotDependOnThreadCount) {
  Generator gen(7);
  const Tensor x = randn({1000, 768}, gen), w = randn({768}, gen), b = randn({768}, gen);
  const Tensor dout = randn({1000, 768}, gen);
  const ops::LayerNormOutput fwd = ops::layernorm(x, w, b, 1e-5);
  const ops::RMSNormOutput rms = ops::rmsnorm(x, w, 1e-6);
  const int saved = num_threads();
  std::vector<std::vector<float>> layernorm_grads, rmsnorm_grads;
  for (int threads : {1, 2, 3, 4}) {
    set_num_threads(threads);
    const ops::LayerNormGrads g =
        ops::layernorm_backward(dout, x, w, fwd.mean, fwd.rstd, true, true, true);
    std::vector<float> all = to_vector<float>(*g.dweight);
    for (float v : to_vector<float>(*g.dbias)) all.push_back(v);
    for (float v : to_vector<float>(*g.dx)) all.push_back(v);
    layernorm_grads.push_back(all);
    rmsnorm_grads.push_back(
        to_vector<float>(*ops::rmsnorm_backward(dout, x, w, rms.rstd, false, true).dweight));
  }
  set_num_threads(saved);
  for (size_t i = 1; i < layernorm_grads.size(); ++i) {
    EXPECT_EQ(layernorm_grads[i], layernorm_grads[0]) << "layernorm, thread setting " << i + 1;
    EXPECT_EQ(rmsnorm_grads[i], rmsnorm_grads[0]) << "rmsnorm, thread setting " << i + 1;
  }
}

}  // namespace
}  // namespace trident
