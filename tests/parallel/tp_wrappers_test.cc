// Tensor-parallel styles as layer wrappers, under mpirun (2 and 4 ranks, label mpi):
//   (a) a Linear or Conv1D carrying a tensor-parallel style and a second wrapper added after it
//       (a toy low-rank adapter, support/low_rank_adapter.h) at once, column- and row-wise, on
//       tp = 2 and 4: outputs and every gradient (input, weight, bias, both adapter factors)
//       against the float64 single-process layer with the same adapter, within
//       docs/numerics.md's tolerance; the adapter runs inside the style (its factor on a
//       column-parallel layer: A replicated, B split; on a row-parallel one: A split, its
//       partial product summed with the base's before the bias);
//   (b) a layer type defined here gets a style registered here (TRI_REGISTER_TP_STYLE), which
//       TensorParallelPlan::apply gives it through a plan entry, nothing in src/parallel edited;
//   (c) an entry whose style a layer type does not have is an error naming the entry, the
//       layer, its type and the styles it has.
// The styles' effect on whole models is tensor_parallel_test's and golden_losses_test's.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "comm/mpi_communicator.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/rng.h"
#include "core/views.h"
#include "models/gpt2/model.h"
#include "nn/linear.h"
#include "nn/wrapper.h"
#include "parallel/placement.h"
#include "parallel/tensor_parallel.h"
#include "parallel/tp_collectives.h"
#include "parallel/tp_style_registry.h"
#include "support/low_rank_adapter.h"
#include "support/tiny_model_configs.h"

namespace trident::parallel {
namespace {

constexpr int64_t kIn = 8, kOut = 12, kRank = 3, kB = 2, kT = 3;

// A layer type of this test: y = x * g elementwise, g (C). Its own wrapper family, built from
// nn/wrapper.h's pieces as nn's layers are.
class Gain;
class GainWrapper;
class GainInner : public nn::StackCursor<GainInner, Gain, GainWrapper> {
 public:
  using StackCursor::StackCursor;
  Tensor forward(const Tensor& x, const nn::LayerParams& p) const;
};
class GainWrapper : public nn::Wrapper {
 public:
  virtual Tensor forward(const Tensor& x, const nn::LayerParams& p, const GainInner& inner) const = 0;
};
class Gain final : public nn::WrappedModule<GainWrapper> {
 public:
  explicit Gain(int64_t channels) : gain_(register_parameter("gain", zeros({channels}))) {}
  Tensor forward(const Tensor& x) const {
    return wrapped() ? GainInner(*this, 0).forward(x, {gain_}) : compute(x, {gain_});
  }
  Tensor compute(const Tensor& x, const nn::LayerParams& p) const { return x * p.weight; }

 private:
  Tensor gain_;
};
Tensor GainInner::forward(const Tensor& x, const nn::LayerParams& p) const {
  return next(&GainWrapper::forward, &Gain::compute, x, p);
}

// Its tensor-parallel style: each rank scales its own channels, the ranks' channels gathered.
class ChannelSplit final : public GainWrapper {
 public:
  explicit ChannelSplit(comm::Communicator& tp, int64_t channels) : tp_(tp) {
    for (int r = 0; r < tp.size(); ++r) widths_.push_back(shard_range(channels, tp.size(), r).second);
    begin_ = shard_range(channels, tp.size(), tp.rank()).first;
  }
  nn::WrapperKind kind() const override { return nn::WrapperKind::kParallelism; }
  std::string name() const override { return "channel_split"; }
  Tensor forward(const Tensor& x, const nn::LayerParams& p, const GainInner& inner) const override {
    const Tensor in = copy_to_tp(x, tp_);  // whole on every rank; its gradient sums the ranks' channels
    const Tensor mine = trident::narrow(in, in.dim() - 1, begin_, widths_[static_cast<size_t>(tp_.rank())]);
    return gather_from_tp(inner.forward(mine, p), tp_, widths_);
  }

 private:
  comm::Communicator& tp_;
  std::vector<int64_t> widths_;
  int64_t begin_ = 0;
};

TRI_REGISTER_TP_STYLE(Gain, "channel_split", {{"gain", 0}}, [](Gain& layer, const TpStyleTarget& t) {
  layer.add_wrapper(std::make_shared<ChannelSplit>(t.tp, layer.parameter("gain").size(0)));
});

// A module type no style is registered for.
class Bare final : public nn::Module {};

// GPT-2 (the applier takes a CausalLM) with the layers under test beside its own, and a plan
// of the test's.
class Probed final : public models::gpt2::GPT2 {
 public:
  explicit Probed(nn::ParallelPlan plan) : GPT2(config()), plan_(std::move(plan)) {
    linear = register_module("probe_linear", std::make_shared<nn::Linear>(kIn, kOut, true));
    conv = register_module("probe_conv", std::make_shared<nn::Conv1D>(kIn, kOut));
    gain = register_module("probe_gain", std::make_shared<Gain>(kOut));
    register_module("probe_bare", std::make_shared<Bare>());
  }
  nn::ParallelPlan parallel_plan(int64_t) const override { return plan_; }

  std::shared_ptr<nn::Linear> linear;
  std::shared_ptr<nn::Conv1D> conv;
  std::shared_ptr<Gain> gain;

 private:
  static models::gpt2::GPT2Config config() {
    models::ModelConfig c = models::testing::tiny_gpt2();
    c.n_head = 4;  // tp 2 and 4 split the heads
    return models::gpt2::GPT2Config::from(c);
  }
  nn::ParallelPlan plan_;
};

// docs/numerics.md: |y - r| <= 8 u (|r| + sqrt(K) rms(r)) against the float64 reference r, u =
// 2^-24 for f32, K the longest sum behind an element. Here every sum (features in, out, the
// rank, the B*T rows) is shorter than kIn + kOut + kB * kT.
void expect_close(const Tensor& got, const Tensor& ref, const std::string& what) {
  ASSERT_EQ(got.shape(), ref.shape()) << what;
  const Tensor g = core::contiguous(core::cast(got, DType::kF64)), r = core::contiguous(ref);
  const double* gp = g.data_ptr<double>();
  const double* rp = r.data_ptr<double>();
  double sq = 0;
  for (int64_t i = 0; i < r.numel(); ++i) sq += rp[i] * rp[i];
  const double rms = std::sqrt(sq / static_cast<double>(r.numel()));
  const double u = std::ldexp(1.0, -24), K = kIn + kOut + kB * kT;
  int failures = 0;
  for (int64_t i = 0; i < r.numel() && failures < 5; ++i) {
    const double tol = 8 * u * (std::abs(rp[i]) + std::sqrt(K) * rms), diff = std::abs(gp[i] - rp[i]);
    if (diff > tol) {
      ++failures;
      ADD_FAILURE() << what << ": index " << i << " expected " << rp[i] << " got " << gp[i] << " difference " << diff
                    << " tolerance " << tol;
    }
  }
}

std::vector<float> values(const Tensor& t) {
  const Tensor c = core::contiguous(t);
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

Tensor leaf(const Tensor& t) {
  Tensor out = core::clone(t);
  out.set_requires_grad(true);
  return out;
}

// t's [begin, begin + length) along `dim`, as a tensor of its own.
Tensor part(const Tensor& t, int64_t dim, std::pair<int64_t, int64_t> range) {
  return core::contiguous(views::narrow(t, dim, range.first, range.second));
}

class TpWrappersTest : public ::testing::Test {
 protected:
  void SetUp() override { world = comm::MpiRuntime::world(); }
  // The tensor-parallel groups of `tp` consecutive ranks.
  std::unique_ptr<comm::Communicator> group(int tp) const {
    return world->split(world->rank() / tp, world->rank() % tp);
  }
  std::vector<int> degrees() const {
    std::vector<int> out;
    for (int tp : {2, 4})
      if (world->size() % tp == 0) out.push_back(tp);
    return out;
  }
  std::unique_ptr<comm::Communicator> world;
};

struct Case {
  bool conv;     // Conv1D (weight (in, out), GELU fused) or Linear (weight (out, in))
  bool rowwise;  // else column-wise
};

// One layer under one style with the adapter added after the style, against the float64 layer
// with the same adapter in one process.
void check_case(const Case& c, comm::Communicator& tp) {
  const std::string layer = c.conv ? "probe_conv" : "probe_linear";
  const std::string what = layer + (c.rowwise ? " rowwise" : " columnwise") + ", tp " + std::to_string(tp.size());
  Generator gen(11);  // the same draws on every rank
  const Tensor w = randn(c.conv ? Shape({kIn, kOut}) : Shape({kOut, kIn}), gen), b = randn({kOut}, gen);
  const Tensor a = randn({kRank, kIn}, gen), bb = randn({kOut, kRank}, gen);
  const Tensor x = randn({kB, kT, kIn}, gen), g = randn({kB, kT, kOut}, gen);
  const nn::Activation act = c.conv ? nn::Activation::kGeluTanh : nn::Activation::kNone;
  auto f64 = [](const Tensor& t) { return core::cast(t, DType::kF64); };

  // The reference: one process, float64.
  std::unique_ptr<nn::LinearLayer> ref;
  if (c.conv) ref = std::make_unique<nn::Conv1D>(kIn, kOut, DType::kF64);
  else ref = std::make_unique<nn::Linear>(kIn, kOut, true, DType::kF64);
  {
    autograd::NoGradGuard no_grad;
    core::copy_(ref->parameter("weight"), f64(w));
    core::copy_(ref->parameter("bias"), f64(b));
  }
  const Tensor ref_a = leaf(f64(a)), ref_b = leaf(f64(bb)), ref_x = leaf(f64(x));
  ref->add_wrapper(std::make_shared<testing::LowRankAdapter>(ref_a, ref_b));
  const Tensor ref_y = c.conv ? static_cast<nn::Conv1D&>(*ref).forward(ref_x, act)
                              : static_cast<nn::Linear&>(*ref).forward(ref_x);
  autograd::backward(trident::sum(ref_y * f64(g)));

  // The model: the style from the plan, then the adapter with this rank's factors.
  Probed model(nn::ParallelPlan{{layer, c.rowwise ? nn::tp_style::kRowwise : nn::tp_style::kColumnwise}});
  nn::LinearLayer& probe = c.conv ? static_cast<nn::LinearLayer&>(*model.conv) : *model.linear;
  {
    autograd::NoGradGuard no_grad;
    core::copy_(probe.parameter("weight"), w);
    core::copy_(probe.parameter("bias"), b);
  }
  const std::unique_ptr<TensorParallelPlan> plan = TensorParallelPlan::apply(model, tp);
  const auto in = shard_range(kIn, tp.size(), tp.rank()), out = shard_range(kOut, tp.size(), tp.rank());
  // Column-wise: A replicated, B split by its rows (the output features); row-wise: A split by
  // its columns (the input features), B replicated. A replicated factor enters through
  // copy_to_tp, so that its gradient sums the ranks' parts.
  const testing::LowRankAdapter::Enter replicated = [&tp](const Tensor& t) { return copy_to_tp(t, tp); };
  const Tensor my_a = leaf(c.rowwise ? part(a, 1, in) : a), my_b = leaf(c.rowwise ? bb : part(bb, 0, out));
  probe.add_wrapper(std::make_shared<testing::LowRankAdapter>(my_a, my_b, c.rowwise ? nullptr : replicated,
                                                              c.rowwise ? replicated : nullptr));
  const std::vector<std::string> order = {c.rowwise ? "rowwise" : "columnwise", "low_rank"};
  EXPECT_EQ(probe.wrapper_names(), order) << what << ": the adapter, added after the style, runs inside it";
  const Tensor my_x = leaf(c.rowwise ? part(x, 2, in) : x);
  const Tensor y = c.conv ? model.conv->forward(my_x, act) : model.linear->forward(my_x);
  autograd::backward(trident::sum(y * (c.rowwise ? g : part(g, 2, out))));

  expect_close(y, c.rowwise ? ref_y : part(ref_y, 2, out), what + ": output");
  expect_close(*my_x.grad(), c.rowwise ? part(*ref_x.grad(), 2, in) : *ref_x.grad(), what + ": input gradient");
  for (const char* p : {"weight", "bias"}) {
    const std::string name = layer + "." + p;
    expect_close(*probe.parameter(p).grad(), plan->local_from_full(name, *ref->parameter(p).grad()),
                 what + ": gradient of " + name);
  }
  expect_close(*my_a.grad(), c.rowwise ? part(*ref_a.grad(), 1, in) : *ref_a.grad(), what + ": gradient of A");
  expect_close(*my_b.grad(), c.rowwise ? *ref_b.grad() : part(*ref_b.grad(), 0, out), what + ": gradient of B");
}

TEST_F(TpWrappersTest, AnAdapterRunsInsideTheStyleOnEveryLayout) {
  if (degrees().empty()) GTEST_SKIP() << "one rank has no tensor parallelism";
  for (int tp : degrees()) {
    const std::unique_ptr<comm::Communicator> comm = group(tp);
    for (bool conv : {false, true})
      for (bool rowwise : {false, true}) check_case({conv, rowwise}, *comm);
  }
}

TEST_F(TpWrappersTest, ALayerTypeOfTheTestGetsItsStyleThroughThePlan) {
  if (degrees().empty()) GTEST_SKIP() << "one rank has no tensor parallelism";
  for (int tp : degrees()) {
    const std::unique_ptr<comm::Communicator> comm = group(tp);
    Generator gen(12);
    const Tensor gain = randn({kOut}, gen), x = randn({kB, kT, kOut}, gen), g = randn({kB, kT, kOut}, gen);
    Gain ref(kOut);
    Probed model(nn::ParallelPlan{{"probe_gain", "channel_split"}});
    {
      autograd::NoGradGuard no_grad;
      core::copy_(ref.parameter("gain"), gain);
      core::copy_(model.gain->parameter("gain"), gain);
    }
    const std::unique_ptr<TensorParallelPlan> plan = TensorParallelPlan::apply(model, *comm);
    const auto mine = shard_range(kOut, tp, comm->rank());
    EXPECT_TRUE(plan->is_split("probe_gain.gain"));
    EXPECT_EQ(model.gain->parameter("gain").shape(), Shape({mine.second}));
    EXPECT_EQ(model.gain->wrapper_names(), std::vector<std::string>{"channel_split"});
    const Tensor ref_x = leaf(x), my_x = leaf(x);
    const Tensor ref_y = ref.forward(ref_x), y = model.gain->forward(my_x);
    autograd::backward(trident::sum(ref_y * g));
    autograd::backward(trident::sum(y * g));
    const std::string what = "channel_split, tp " + std::to_string(tp);
    // Elementwise products, and sums with zeros: the single-process numbers exactly.
    EXPECT_EQ(values(y), values(ref_y)) << what;
    EXPECT_EQ(values(*my_x.grad()), values(*ref_x.grad())) << what;
    expect_close(*model.gain->parameter("gain").grad(),
                 core::cast(part(*ref.parameter("gain").grad(), 0, mine), DType::kF64), what + ": gradient of the gain");
  }
}

TEST_F(TpWrappersTest, AStyleALayerTypeDoesNotHaveIsAnErrorNamingTheStylesItHas) {
  if (world->size() < 2) GTEST_SKIP() << "one rank has no tensor parallelism";
  auto error = [&](nn::ParallelPlan plan) -> std::string {
    Probed model(std::move(plan));
    try {
      TensorParallelPlan::apply(model, *world);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  };
  std::string e = error({{"probe_gain", nn::tp_style::kRowwise}});
  EXPECT_NE(e.find("the plan's entry 'probe_gain' (rowwise) names layer 'probe_gain' of type "), std::string::npos) << e;
  EXPECT_NE(e.find("Gain, which has no style 'rowwise' (its styles: channel_split;"), std::string::npos) << e;
  e = error({{"probe_linear", "channel_split"}});
  EXPECT_NE(e.find("names layer 'probe_linear' of type nn::Linear, which has no style 'channel_split' (its styles: "
                   "columnwise, columnwise_replicated, rowwise, vocab_parallel;"),
            std::string::npos)
      << e;
  e = error({{"probe_bare", nn::tp_style::kColumnwise}});
  EXPECT_NE(e.find("Bare, which has no style 'columnwise' (no tensor-parallel style is registered for that type"),
            std::string::npos)
      << e;
  // A second registration of a (style, type) pair is refused.
  EXPECT_THROW(add_tp_style<Gain>(tp_style_registry(), "channel_split", {}, [](Gain&, const TpStyleTarget&) {}), Error);
}

}  // namespace
}  // namespace trident::parallel
