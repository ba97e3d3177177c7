#include "autograd/engine.h"

#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "core/allocator.h"
#include "core/factory.h"

namespace trident {
namespace {

Tensor param(std::vector<float> v, Shape s) {
  Tensor t = from_vector(v, s);
  t.set_requires_grad(true);
  return t;
}

TEST(Engine, ChainRuleThroughSeveralOps) {
  Tensor x = param({1, 2, 3}, {3});
  Tensor w = param({4, 5, 6}, {3});
  Tensor y = sum(mul(x, w) * 2.0);  // y = 2 * sum(x * w)
  autograd::backward(y);
  EXPECT_EQ(to_vector<float>(*x.grad()), (std::vector<float>{8, 10, 12}));
  EXPECT_EQ(to_vector<float>(*w.grad()), (std::vector<float>{2, 4, 6}));
}

TEST(Engine, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = param({1, 2}, {2});
  autograd::backward(sum(x * 3.0));
  autograd::backward(sum(x * 3.0));
  EXPECT_EQ(to_vector<float>(*x.grad()), (std::vector<float>{6, 6}));
  x.zero_grad();
  EXPECT_FALSE(x.grad().has_value());
}

TEST(Engine, GradIsTaggedAsGradientMemory) {
  Tensor x = param({1, 2}, {2});
  autograd::backward(sum(x * 3.0));
  EXPECT_EQ(host_allocator().category_of(x.grad()->storage()->data_ptr()), MemoryCategory::kGradient);
}

TEST(Engine, NoGradRecordsNothing) {
  Tensor x = param({1, 2}, {2});
  autograd::NoGradGuard guard;
  Tensor y = x * 2.0;
  EXPECT_FALSE(y.requires_grad());
  EXPECT_THROW(autograd::backward(sum(y)), Error);
}

TEST(Engine, NonScalarRootNeedsAGradient) {
  Tensor x = param({1, 2}, {2});
  Tensor y = x * 2.0;
  EXPECT_THROW(autograd::backward(y), Error);
  autograd::backward({y}, {from_vector<float>({1, -1}, {2})});
  EXPECT_EQ(to_vector<float>(*x.grad()), (std::vector<float>{2, -2}));
}

TEST(Engine, SecondBackwardNeedsRetainGraph) {
  Tensor x = param({1, 2}, {2});
  Tensor y = sum(mul(x, x));
  autograd::backward(y, {.retain_graph = true});
  autograd::backward(y);
  EXPECT_EQ(to_vector<float>(*x.grad()), (std::vector<float>{4, 8}));
  try {
    autograd::backward(y);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("retain_graph"), std::string::npos) << e.what();
  }
}

TEST(Engine, InPlaceChangeOfSavedTensorIsDetected) {
  Tensor x = param({1, 2}, {2});
  Tensor a = from_vector<float>({3, 4}, {2});
  Tensor y = sum(mul(x, a));
  core::copy_(a, zeros({2}));  // modifies a value saved for backward
  try {
    autograd::backward(y);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("modified by an in-place"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'mul'"), std::string::npos) << e.what();
  }
}

TEST(Engine, GradReadyHookFiresOnceWithTheFinalGradient) {
  Tensor w = param({1, 1}, {2});
  Tensor x = from_vector<float>({2, 3}, {2});
  int calls = 0;
  std::vector<float> seen;
  autograd::register_grad_ready_hook(w, [&](const Tensor& leaf) {
    ++calls;
    seen = to_vector<float>(*leaf.grad());
  });
  // w is used three times: the hook must see the sum of all three contributions.
  Tensor y = sum(mul(w, x) + mul(w, x) + w);
  autograd::backward(y);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, (std::vector<float>{5, 7}));
}

TEST(Engine, HooksFireInReverseLayerOrder) {
  // A chain of "layers": the last layer's parameter becomes final first, which is what lets
  // data parallelism start communicating before backward ends.
  std::vector<Tensor> ws;
  for (int i = 0; i < 4; ++i) ws.push_back(param({0.5f, 0.5f}, {2}));
  std::vector<int> order;
  for (int i = 0; i < 4; ++i)
    autograd::register_grad_ready_hook(ws[static_cast<size_t>(i)], [&order, i](const Tensor&) { order.push_back(i); });
  Tensor h = from_vector<float>({1, 2}, {2});
  for (const Tensor& w : ws) h = mul(h, w) + 1.0;
  autograd::backward(sum(h));
  EXPECT_EQ(order, (std::vector<int>{3, 2, 1, 0}));
}

TEST(Engine, BroadcastGradientsAreSummedToTheOperandShape) {
  Tensor b = param({1, 2, 3}, {3});
  Tensor x = from_vector<float>({1, 1, 1, 1, 1, 1}, {2, 3});
  autograd::backward(sum(x + b));
  EXPECT_EQ(to_vector<float>(*b.grad()), (std::vector<float>{2, 2, 2}));
}

TEST(Engine, UnusedOutputOfMultiOutputGraphGetsZeros) {
  Tensor x = param({1, 2, 3, 4}, {4});
  Tensor left = narrow(x, 0, 0, 2);
  autograd::backward(sum(left * 2.0));
  EXPECT_EQ(to_vector<float>(*x.grad()), (std::vector<float>{2, 2, 0, 0}));
}

}  // namespace
}  // namespace trident
