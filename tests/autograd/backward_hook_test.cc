// backward_hook: the hook runs once per backward, after every downstream use of the marked
// tensor has sent its gradient (and downstream leaves' grad-ready hooks have fired), before
// anything upstream; the gradient passes through unchanged.
#include "autograd/functions/backward_hook.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "autograd/functions.h"
#include "core/factory.h"

namespace trident {
namespace {

Tensor leaf(std::vector<float> v) {
  Tensor t = from_vector(v, {static_cast<int64_t>(v.size())});
  t.set_requires_grad(true);
  return t;
}

TEST(BackwardHook, RunsOnceBetweenTheDownstreamAndTheUpstreamGradients) {
  Tensor x = leaf({1, 2, 3});
  Tensor w = leaf({4, 5, 6});
  std::vector<std::string> events;
  autograd::register_grad_ready_hook(x, [&](const Tensor&) { events.push_back("x ready"); });
  autograd::register_grad_ready_hook(w, [&](const Tensor&) { events.push_back("w ready"); });
  const Tensor a = x * 2.0;
  const Tensor b = backward_hook(a, [&] { events.push_back("hook"); });
  // b is used twice downstream: the hook waits for both contributions.
  const Tensor loss = sum(b * w + b * b);
  EXPECT_TRUE(events.empty());
  autograd::backward(loss);
  EXPECT_EQ(events, (std::vector<std::string>{"w ready", "hook", "x ready"}));
  // d/dx sum(2x w + 4x^2) = 2w + 8x
  EXPECT_EQ(to_vector<float>(*x.grad()), (std::vector<float>{16, 26, 36}));
  EXPECT_EQ(to_vector<float>(*w.grad()), (std::vector<float>{2, 4, 6}));
}

TEST(BackwardHook, IsThePlainTensorWithoutGradMode) {
  Tensor x = leaf({1, 2});
  int calls = 0;
  autograd::NoGradGuard no_grad;
  const Tensor y = backward_hook(x, [&] { ++calls; });
  EXPECT_TRUE(y.is_same(x));
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace trident
