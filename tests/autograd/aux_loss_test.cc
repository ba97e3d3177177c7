// attach_aux_loss's backward (autograd/functions/aux_loss.h): a small graph
// L = sum(v * attach(h, mean(h^2), c s)) with h = tanh(x W), back-propagated from a seed s,
// must give every gradient of the objective
//   F = s * sum(v * h) + s * c * mean(h^2)
// (central finite differences in float64, docs/numerics.md), with the attach inside a
// checkpointed region (full and selective: the loss's gradient arrives once, from the rerun),
// and over two backwards (gradient accumulation: the gradients of F1 + F2). The op suite checks
// the forward; tests/nn/aux_outputs_test.cc the seed and the values nn::AuxOutputs records.
#include "autograd/functions/aux_loss.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/functions.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/rng.h"

namespace trident {
namespace {

constexpr double kCoefficient = 0.7;
constexpr double kSeed = 0.375;  // as 1/accum x a loss scale would be: anything but 1

Tensor random_f64_param(const Shape& shape, Generator& g) {
  Tensor t = core::cast(randn(shape, g), DType::kF64);
  t.set_requires_grad(true);
  return t;
}

struct Params {
  Generator g{5};
  Tensor x1 = random_f64_param({3, 4}, g), x2 = random_f64_param({3, 4}, g),
         w = random_f64_param({4, 6}, g), v = random_f64_param({3, 6}, g);
  std::vector<Tensor> all() const { return {x1, x2, w, v}; }
};

enum class Region { kNone, kFull, kSelective };

// h = tanh(x W) with mean(h^2) attached (its backward seeded with c s), inside a checkpointed
// region or not; then L = sum(v * h). `forwards` counts the region's runs.
Tensor main_loss(const Tensor& x, const Tensor& w, const Tensor& v, Region region, int* forwards = nullptr) {
  auto block = [w, forwards](const TensorList& in) {
    if (forwards != nullptr) ++*forwards;
    const Tensor h = tanh(matmul(in[0], w));
    return attach_aux_loss(h, mean(h * h), kCoefficient * kSeed);
  };
  const Tensor h = region == Region::kNone ? block({x})
                                           : activation_checkpoint(block, {x},
                                                                   region == Region::kFull
                                                                       ? RecomputePolicy::kEverything
                                                                       : RecomputePolicy::kAllButMatmuls);
  return sum(v * h);
}

// The objective the channel stands for, written directly (no autograd): s sum(v h) + s c mean(h^2).
double objective(const Tensor& x, const Tensor& w, const Tensor& v) {
  autograd::NoGradGuard no_grad;
  const Tensor h = tanh(matmul(x, w));
  return kSeed * sum(v * h).item() + kSeed * kCoefficient * mean(h * h).item();
}

// Every element of every gradient against 4-point central differences of `f` in float64
// (step 1e-3; tolerance 1e-7 (|g| + rms(g)), docs/numerics.md).
void expect_gradients(const std::vector<Tensor>& params, const std::function<double(const std::vector<Tensor>&)>& f,
                      const std::string& what) {
  std::vector<Tensor> probe;
  for (const Tensor& p : params) probe.push_back(core::clone(detach(p)));
  constexpr double h = 1e-3;
  for (size_t k = 0; k < params.size(); ++k) {
    ASSERT_TRUE(params[k].grad().has_value()) << what << ": parameter " << k << " has no gradient";
    const std::vector<double> got = to_vector<double>(*params[k].grad());
    std::vector<double> fd(got.size());
    double* data = probe[k].data_ptr<double>();
    for (size_t i = 0; i < got.size(); ++i) {
      const double x0 = data[i];
      auto at = [&](double d) {
        data[i] = x0 + d;
        const double y = f(probe);
        data[i] = x0;
        return y;
      };
      fd[i] = (-at(2 * h) + 8 * at(h) - 8 * at(-h) + at(-2 * h)) / (12 * h);
    }
    double rms = 0.0;
    for (double g : fd) rms += g * g;
    rms = std::sqrt(rms / static_cast<double>(fd.size()));
    for (size_t i = 0; i < got.size(); ++i) {
      const double tol = 1e-7 * (std::abs(fd[i]) + rms);
      EXPECT_NEAR(got[i], fd[i], tol) << what << ": parameter " << k << ", element " << i;
    }
  }
}

// One micro-batch (x1), back-propagated from the seed.
void one_backward(Region region, const std::string& what) {
  Params p;
  int forwards = 0;
  autograd::backward(main_loss(p.x1, p.w, p.v, region, &forwards) * kSeed);
  EXPECT_EQ(forwards, region == Region::kNone ? 1 : 2) << what << ": a checkpointed region runs twice";
  EXPECT_FALSE(p.x2.grad().has_value());
  expect_gradients({p.x1, p.w, p.v}, [](const std::vector<Tensor>& q) { return objective(q[0], q[1], q[2]); }, what);
}

TEST(AuxLoss, GradientsAreThoseOfTheObjective) { one_backward(Region::kNone, "no checkpoint"); }
TEST(AuxLoss, GradientsThroughAFullCheckpointArriveOnce) { one_backward(Region::kFull, "full checkpoint"); }
TEST(AuxLoss, GradientsThroughASelectiveCheckpointArriveOnce) {
  one_backward(Region::kSelective, "selective checkpoint");
}

// Two micro-batches, two backwards into the same .grad: the gradients of F(x1) + F(x2).
TEST(AuxLoss, GradientAccumulationAddsTheMicroBatchesObjectives) {
  for (Region region : {Region::kNone, Region::kFull, Region::kSelective}) {
    const std::string what = std::string("accumulation, checkpoint ") +
                             (region == Region::kNone ? "none" : region == Region::kFull ? "full" : "selective");
    Params p;
    for (const Tensor& x : {p.x1, p.x2}) autograd::backward(main_loss(x, p.w, p.v, region) * kSeed);
    expect_gradients(p.all(),
                     [](const std::vector<Tensor>& q) { return objective(q[0], q[2], q[3]) + objective(q[1], q[2], q[3]); },
                     what);
  }
}

// x (2,3) and y (4), both wanting gradients.
std::pair<Tensor, Tensor> leaves(uint64_t seed) {
  Generator g(seed);
  Tensor x = randn({2, 3}, g), y = randn({4}, g);
  x.set_requires_grad(true);
  y.set_requires_grad(true);
  return {x, y};
}

// The op alone: x's gradient passes through, the loss gets loss_grad in its own dtype and shape.
TEST(AuxLoss, TheOpPassesXsGradientAndSeedsTheLoss) {
  const auto [x, y] = leaves(2);
  const Tensor loss = sum(y * y);
  const Tensor out = attach_aux_loss(x, loss, 0.25);
  EXPECT_FALSE(out.is_same(x));
  autograd::backward(sum(out * 3.0));
  EXPECT_EQ(to_vector<float>(*x.grad()), std::vector<float>(6, 3.0f));
  // d(0.25 * sum(y^2))/dy = 0.5 y
  const std::vector<float> yv = to_vector<float>(y), dy = to_vector<float>(*y.grad());
  for (size_t i = 0; i < yv.size(); ++i) EXPECT_FLOAT_EQ(dy[i], 0.5f * yv[i]);
}

TEST(AuxLoss, OutsideGradModeItIsX) {
  const auto [x, y] = leaves(3);
  autograd::NoGradGuard no_grad;
  EXPECT_TRUE(attach_aux_loss(x, sum(y), 1.0).is_same(x));
}

}  // namespace
}  // namespace trident
