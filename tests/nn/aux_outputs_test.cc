// nn::AuxOutputs: the loss seed and coefficient reach the loss's gradient; values are summed
// and counted per name, once per forward, never for a checkpointed region's rerun (full or
// selective), once per micro-batch under accumulation; take() forgets; outside grad mode it
// only records. (The op's gradients against finite differences: tests/autograd/aux_loss_test.cc.)
#include "nn/aux_outputs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "core/factory.h"
#include "core/rng.h"

namespace trident::nn {
namespace {

constexpr double kCoefficient = 3.0;
constexpr double kSeed = 0.25;

struct Graph {
  Generator g{9};
  Tensor x = randn({2, 3}, g), y = randn({4}, g);
  Graph() {
    x.set_requires_grad(true);
    y.set_requires_grad(true);
  }
  // out = x with sum(y^2) attached; the region also records a metric.
  Tensor region(AuxOutputs& aux, const Tensor& in) const {
    aux.add_metric("load", 2.0);
    return aux.add_loss("y_sq", in * 1.0, sum(y * y), kCoefficient);
  }
  double y_sq() const {
    autograd::NoGradGuard no_grad;
    return sum(y * y).item();
  }
};

// y's gradient is c s d(sum y^2)/dy = 2 c s y, and x's passes through: `backwards` times.
void expect_gradients(const Graph& gr, int backwards, const std::string& what) {
  ASSERT_TRUE(gr.y.grad().has_value()) << what;
  const std::vector<float> y = to_vector<float>(gr.y), dy = to_vector<float>(*gr.y.grad());
  for (size_t i = 0; i < y.size(); ++i)
    EXPECT_FLOAT_EQ(dy[i], static_cast<float>(backwards * 2 * kCoefficient * kSeed) * y[i]) << what << ", element " << i;
  EXPECT_EQ(to_vector<float>(*gr.x.grad()), std::vector<float>(6, static_cast<float>(backwards))) << what;
}

TEST(AuxOutputs, TheLossGetsCoefficientTimesSeed) {
  Graph gr;
  AuxOutputs aux;
  EXPECT_EQ(aux.loss_seed(), 1.0);
  aux.set_loss_seed(kSeed);
  autograd::backward(sum(gr.region(aux, gr.x)));
  expect_gradients(gr, 1, "plain");
  const AuxValues v = aux.take();
  EXPECT_EQ(v.at("y_sq").count, 1);
  EXPECT_FLOAT_EQ(static_cast<float>(v.at("y_sq").sum), static_cast<float>(gr.y_sq()));  // without the coefficient
  EXPECT_EQ(v.at("load").count, 1);
  EXPECT_TRUE(aux.take().empty()) << "take() forgets";
}

// A checkpointed region runs twice; its values count once, and its loss's gradient arrives once.
TEST(AuxOutputs, ACheckpointedRegionCountsOnce) {
  for (RecomputePolicy policy : {RecomputePolicy::kEverything, RecomputePolicy::kAllButMatmuls}) {
    const std::string what = policy == RecomputePolicy::kEverything ? "full" : "selective";
    Graph gr;
    AuxOutputs aux;
    aux.set_loss_seed(kSeed);
    int runs = 0;
    const Tensor out = activation_checkpoint(
        [&](const TensorList& in) {
          ++runs;
          return gr.region(aux, in[0]);
        },
        {gr.x}, policy);
    autograd::backward(sum(out));
    EXPECT_EQ(runs, 2) << what;
    expect_gradients(gr, 1, what);
    const AuxValues v = aux.take();
    EXPECT_EQ(v.at("y_sq").count, 1) << what;
    EXPECT_EQ(v.at("load").count, 1) << what;
    EXPECT_EQ(v.at("load").sum, 2.0) << what;
  }
}

TEST(AuxOutputs, AccumulationCountsEachMicroBatch) {
  Graph gr;
  AuxOutputs aux;
  aux.set_loss_seed(kSeed);
  for (int i = 0; i < 2; ++i) autograd::backward(sum(gr.region(aux, gr.x)));
  expect_gradients(gr, 2, "two micro-batches");
  const AuxValues v = aux.take();
  EXPECT_EQ(v.at("y_sq").count, 2);
  EXPECT_FLOAT_EQ(static_cast<float>(v.at("y_sq").mean()), static_cast<float>(gr.y_sq()));
  EXPECT_EQ(v.at("load").sum, 4.0);
}

TEST(AuxOutputs, OutsideGradModeItOnlyRecords) {
  AuxOutputs aux;
  Generator g(3);
  Tensor x = randn({2, 3}, g);
  x.set_requires_grad(true);
  {
    autograd::NoGradGuard no_grad;
    EXPECT_TRUE(aux.add_loss("l", x, scalar_tensor(2.5), 1.0).is_same(x));
  }
  aux.add_metric("load", 3.0);
  aux.add_metric("load", 5.0);
  const AuxValues v = aux.take();
  EXPECT_EQ(v.at("l").sum, 2.5);
  EXPECT_EQ(v.at("l").count, 1);
  EXPECT_EQ(v.at("load").sum, 8.0);
  EXPECT_EQ(v.at("load").count, 2);
  EXPECT_EQ(v.at("load").mean(), 4.0);
  EXPECT_TRUE(std::isnan(AuxValue{}.mean()));
}

TEST(AuxOutputs, RefusesALossOfSeveralElementsAndABadCoefficient) {
  AuxOutputs aux;
  Generator g(4);
  const Tensor x = randn({2, 3}, g);
  EXPECT_THROW((void)aux.add_loss("l", x, x, 1.0), Error);
  EXPECT_THROW((void)aux.add_loss("l", x, scalar_tensor(1.0), std::nan("")), Error);
  EXPECT_TRUE(aux.take().empty());
}

}  // namespace
}  // namespace trident::nn
