// Layer wrappers (nn/wrapper.h) in one process: a layer without wrappers is its single-device
// op bit for bit; wrappers run ordered by kind (parallelism, adapters, weight views), each
// kind in the order added; a wrapper can ask the layers below it for less (no bias, no
// activation) and finish the rest; a view can replace the weight the layer reads; and an LM
// head's fused loss is not taken when a wrapper changes the logits. The tensor-parallel side
// (styles as wrappers, an adapter inside them) is tests/parallel/tp_wrappers_test.cc.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "autograd/functions.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/rng.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/norm.h"
#include "support/low_rank_adapter.h"

namespace trident::nn {
namespace {

std::vector<float> values(const Tensor& t) {
  const Tensor c = core::contiguous(t);
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

// Fills every parameter of `m` with N(0, 1) draws.
void randomize(Module& m, Generator& gen) {
  autograd::NoGradGuard no_grad;
  for (const auto& [name, p] : m.named_parameters()) core::copy_(p, randn(p.shape(), gen));
}

TEST(Wrapper, AnUnwrappedLayerIsItsSingleDeviceOp) {
  Generator gen(1);
  const Tensor x = randn({2, 3, 8}, gen);
  Linear linear(8, 5, true);
  Conv1D conv(8, 5);
  LayerNorm layer_norm(8);
  RMSNorm rms_norm(8);
  Embedding embedding(7, 8);
  for (Module* m : std::vector<Module*>{&linear, &conv, &layer_norm, &rms_norm, &embedding}) randomize(*m, gen);
  EXPECT_EQ(values(linear.forward(x)), values(trident::linear(x, linear.weight(), linear.bias())));
  const Tensor conv_w = trident::transpose(conv.weight(), 0, 1);
  EXPECT_EQ(values(conv.forward(x, Activation::kGeluTanh)), values(trident::linear_gelu_tanh(x, conv_w, conv.bias())));
  EXPECT_EQ(values(layer_norm.forward(x)), values(trident::layernorm(x, layer_norm.parameter("weight"),
                                                                     layer_norm.parameter("bias"), 1e-5)));
  EXPECT_EQ(values(rms_norm.forward(x)), values(trident::rmsnorm(x, rms_norm.parameter("weight"), 1e-6)));
  const Tensor ids = from_vector<int64_t>({0, 6, 3}, Shape({3}));
  EXPECT_EQ(values(embedding.forward(ids)), values(trident::embedding(embedding.weight(), ids)));
  EXPECT_EQ(values(embedding.attend(x)), values(trident::linear(x, embedding.weight())));
  const Tensor targets = from_vector<int64_t>({1, 0, 6, 2, -1, 5}, Shape({6}));
  EXPECT_EQ(embedding.attend_loss(x, targets).item(),
            trident::linear_cross_entropy(x, embedding.weight(), targets).item());
  EXPECT_TRUE(linear.wrapper_names().empty());
}

// Records each call on the way in: its name and what it was asked.
class Recorder final : public LinearWrapper {
 public:
  Recorder(WrapperKind kind, std::string name, std::vector<std::string>& log, std::optional<LinearCall> ask = {})
      : kind_(kind), name_(std::move(name)), log_(log), ask_(ask) {}
  WrapperKind kind() const override { return kind_; }
  std::string name() const override { return name_; }
  Tensor forward(const Tensor& x, const LayerParams& p, const LinearCall& call, const LinearInner& inner) const override {
    log_.push_back(name_ + (call.bias ? "" : " (no bias)"));
    return inner.forward(x, p, ask_.value_or(call));
  }

 private:
  WrapperKind kind_;
  std::string name_;
  std::vector<std::string>& log_;
  std::optional<LinearCall> ask_;
};

TEST(Wrapper, WrappersRunOrderedByKindThenInTheOrderAdded) {
  Linear linear(4, 3, true);
  std::vector<std::string> log;
  auto add = [&](WrapperKind kind, const char* name) { linear.add_wrapper(std::make_shared<Recorder>(kind, name, log)); };
  add(WrapperKind::kAdapter, "adapter 1");
  add(WrapperKind::kWeightView, "view");
  add(WrapperKind::kParallelism, "parallel 1");  // added after the adapter: still outside it
  add(WrapperKind::kAdapter, "adapter 2");
  add(WrapperKind::kParallelism, "parallel 2");
  const std::vector<std::string> order = {"parallel 1", "parallel 2", "adapter 1", "adapter 2", "view"};
  EXPECT_EQ(linear.wrapper_names(), order);
  Generator gen(2);
  randomize(linear, gen);
  const Tensor x = randn({5, 4}, gen);
  const Tensor y = linear.forward(x);
  EXPECT_EQ(log, order);
  EXPECT_EQ(values(y), values(trident::linear(x, linear.weight(), linear.bias())));  // pass-through wrappers
}

// What a row-parallel style does, on one rank: the product alone from the layers below, then
// the bias and the activation. The layers below are asked for no bias; the result is the plain
// layer's.
class BiasAfter final : public LinearWrapper {
 public:
  WrapperKind kind() const override { return WrapperKind::kParallelism; }
  std::string name() const override { return "bias after"; }
  Tensor forward(const Tensor& x, const LayerParams& p, const LinearCall& call, const LinearInner& inner) const override {
    const Tensor y = inner.forward(x, p, {.bias = false, .act = Activation::kNone}) + *p.bias;
    return call.act == Activation::kGeluTanh ? trident::gelu_tanh(y) : y;
  }
};

TEST(Wrapper, AWrapperCanAskForTheProductWithoutTheBiasOrTheActivation) {
  Conv1D conv(6, 4);
  Generator gen(3);
  randomize(conv, gen);
  std::vector<std::string> log;
  conv.add_wrapper(std::make_shared<Recorder>(WrapperKind::kAdapter, "below", log));
  conv.add_wrapper(std::make_shared<BiasAfter>());
  const Tensor x = randn({3, 6}, gen);
  const Tensor y = conv.forward(x, Activation::kGeluTanh);
  EXPECT_EQ(log, std::vector<std::string>{"below (no bias)"});
  const Tensor plain = trident::linear(x, trident::transpose(conv.weight(), 0, 1)) + conv.bias();
  EXPECT_EQ(values(y), values(trident::gelu_tanh(plain)));
}

TEST(Wrapper, AnAdapterAddsItsProductBeforeTheActivation) {
  Conv1D conv(6, 4);
  Generator gen(4);
  randomize(conv, gen);
  const Tensor a = randn({2, 6}, gen), b = randn({4, 2}, gen);
  conv.add_wrapper(std::make_shared<testing::LowRankAdapter>(a, b));
  const Tensor x = randn({3, 6}, gen);
  const Tensor base = trident::linear(x, trident::transpose(conv.weight(), 0, 1), conv.bias());
  const Tensor expected = trident::gelu_tanh(base + trident::linear(trident::linear(x, a), b));
  EXPECT_EQ(values(conv.forward(x, Activation::kGeluTanh)), values(expected));
}

// A view of the weight, innermost: the layer computes with 2 W.
class DoubledWeight final : public LinearWrapper {
 public:
  WrapperKind kind() const override { return WrapperKind::kWeightView; }
  std::string name() const override { return "doubled"; }
  Tensor forward(const Tensor& x, const LayerParams& p, const LinearCall& call, const LinearInner& inner) const override {
    const Tensor w = p.weight * 2.0;
    return inner.forward(x, {w, p.bias}, call);
  }
};

TEST(Wrapper, AWeightViewReplacesTheWeightTheLayerReads) {
  Linear linear(4, 3, true);
  Generator gen(5);
  randomize(linear, gen);
  linear.add_wrapper(std::make_shared<DoubledWeight>());
  const Tensor x = randn({2, 4}, gen);
  EXPECT_EQ(values(linear.forward(x)), values(trident::linear(x, linear.weight() * 2.0, linear.bias())));
}

// The fused loss of the layer would skip the adapter: a head with one computes the wrapped
// logits, then their cross-entropy.
TEST(Wrapper, AHeadsLossIsTheLossOfItsWrappedLogits) {
  Generator gen(6);
  const Tensor x = randn({2, 3, 8}, gen);
  const Tensor targets = from_vector<int64_t>({1, 0, 6, 2, -1, 5}, Shape({6}));
  Linear head(8, 7, false);
  randomize(head, gen);
  const Tensor fused = head.loss(x, targets);
  head.add_wrapper(std::make_shared<testing::LowRankAdapter>(randn({2, 8}, gen), randn({7, 2}, gen)));
  const double wrapped = head.loss(x, targets).item();
  EXPECT_EQ(wrapped, trident::cross_entropy(head.forward(x), targets).item());
  EXPECT_NE(wrapped, fused.item());

  // The tied embedding head: an adapter of its logits.
  class LogitBias final : public EmbeddingWrapper {
   public:
    explicit LogitBias(Tensor bias) : bias_(std::move(bias)) {}
    WrapperKind kind() const override { return WrapperKind::kAdapter; }
    std::string name() const override { return "logit bias"; }
    Tensor lookup(const Tensor& ids, const LayerParams& p, const EmbeddingInner& inner) const override {
      return inner.lookup(ids, p);
    }
    Tensor logits(const Tensor& h, const LayerParams& p, const EmbeddingInner& inner) const override {
      return inner.logits(h, p) + bias_;
    }

   private:
    Tensor bias_;
  };
  Embedding table(7, 8);
  randomize(table, gen);
  const double table_fused = table.attend_loss(x, targets).item();
  table.add_wrapper(std::make_shared<LogitBias>(randn({7}, gen)));
  const double table_wrapped = table.attend_loss(x, targets).item();
  EXPECT_EQ(table_wrapped, trident::cross_entropy(table.attend(x), targets).item());
  EXPECT_NE(table_wrapped, table_fused);
}

}  // namespace
}  // namespace trident::nn
