// The generic op-suite runner: see op_case.h for what is checked and docs/numerics.md for
// where every tolerance comes from.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>
#include <sstream>
#include <unordered_set>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "autograd/op_registry.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "core/profiler.h"
#include "core/rng.h"
#include "core/views.h"
#include "op_case.h"
#include "support/emulated_device.h"
#include "tolerance.h"

#ifdef TRIDENT_WITH_CUDA
#include "kernels/cuda/cuda_device.h"
#endif

namespace trident::testing {
namespace {

uint64_t hash_name(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h;
}

// The logical shape of an input (after broadcasting, if any).
Shape logical_shape(const InputSpec& spec) {
  Shape s = spec.shape;
  if (spec.layout == Layout::kBroadcast) s[0] = spec.broadcast_to;
  return s;
}

// Values of one input as doubles, already rounded to `dtype` for floating inputs, in the
// logical (broadcast) shape.
reference::Array generate_values(const InputSpec& spec, DType dtype, Generator& gen) {
  Tensor v = empty(spec.shape, DType::kF64);
  switch (spec.kind) {
    case InputKind::kNormal: normal_(v, gen); break;
    case InputKind::kUniform: uniform_(v, gen, spec.low, spec.high); break;
    case InputKind::kIndex: v = core::cast(randint(0, static_cast<int64_t>(spec.high), spec.shape, gen), DType::kF64); break;
    case InputKind::kQ8_0Grid: {
      TRI_CHECK(spec.shape.size() >= 1 && spec.shape[spec.shape.size() - 1] % 32 == 0, "kQ8_0Grid: the last dim ",
                spec.shape, " is not whole blocks of 32");
      std::vector<double> q = to_vector<double>(core::cast(randint(-127, 128, spec.shape, gen), DType::kF64));
      for (size_t b = 0; b < q.size(); b += 32) q[b + (b / 32) % 32] = (b / 32) % 2 == 0 ? 127.0 : -127.0;
      for (double& x : q) x /= 64.0;
      v = from_vector(q, spec.shape);
      break;
    }
  }
  if (spec.kind != InputKind::kIndex) v = core::cast(core::cast(v, dtype), DType::kF64);
  Tensor logical = spec.layout == Layout::kBroadcast ? core::clone(views::expand(v, logical_shape(spec))) : v;
  return reference::Array(logical.shape(), to_vector<double>(logical));
}

// A tensor of `dtype` on `device` holding `values` in the memory layout the spec asks for.
Tensor make_input(const InputSpec& spec, const reference::Array& values, DType dtype, Device device) {
  const DType d = spec.kind == InputKind::kIndex ? spec.index_dtype : dtype;
  Tensor dense = core::cast(from_vector(values.data, values.shape), d);
  switch (spec.layout) {
    case Layout::kContiguous: return core::to_device(dense, device);
    case Layout::kTransposed: {
      TRI_CHECK(dense.dim() >= 2, "kTransposed needs >= 2 dims");
      // memory holds x^T
      Tensor stored = core::to_device(core::clone(views::transpose(dense, -1, -2)), device);
      return views::transpose(stored, -1, -2);
    }
    case Layout::kStrided: {
      Shape wide = dense.shape();
      wide[wide.size() - 1] *= 2;
      Tensor stored = zeros(wide, d, device);
      Strides strides = stored.strides();
      strides[strides.size() - 1] = 2;
      Tensor view = views::as_strided(stored, dense.shape(), strides, 0);
      core::copy_(view, dense);
      return view;
    }
    case Layout::kBroadcast: {
      Tensor small = views::narrow(dense, 0, 0, 1);
      return views::expand(core::to_device(core::clone(small), device), dense.shape());
    }
  }
  return dense;
}

reference::Array to_array(const Tensor& t) {
  return reference::Array(t.shape(), to_vector<double>(core::to_device(t, Device::cpu())));
}

// Collects the names of every node reachable from the outputs.
std::set<std::string> graph_ops(const TensorList& outputs) {
  std::set<std::string> names;
  std::vector<autograd::Node*> stack;
  std::unordered_set<autograd::Node*> seen;
  for (const Tensor& t : outputs)
    if (t.grad_fn()) stack.push_back(t.grad_fn().get());
  while (!stack.empty()) {
    autograd::Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    names.insert(n->name());
    for (const autograd::Edge& e : n->next_edges)
      if (e.node) stack.push_back(e.node.get());
  }
  return names;
}

struct RunResult {
  TensorList outputs;
  std::vector<std::optional<Tensor>> grads;  // one per input
};

// Runs forward (and backward with `upstream`, if given) on inputs built from `values`.
RunResult run(const OpCase& c, const Arrays& values, DType dtype, const Arrays* upstream,
              Device device = Device::cpu()) {
  TensorList inputs;
  for (size_t i = 0; i < c.inputs().size(); ++i) {
    Tensor t = make_input(c.inputs()[i], values[i], dtype, device);
    if (upstream && c.inputs()[i].differentiable) t.set_requires_grad(true);
    inputs.push_back(t);
  }
  RunResult r;
  r.outputs = c.forward_fn()(inputs);
  if (upstream) {
    std::vector<Tensor> roots;
    std::vector<std::optional<Tensor>> grads;
    for (size_t o = 0; o < r.outputs.size(); ++o) {
      if (!r.outputs[o].requires_grad()) continue;
      roots.push_back(r.outputs[o]);
      grads.push_back(core::to_device(
          core::cast(from_vector((*upstream)[o].data, (*upstream)[o].shape), r.outputs[o].dtype()), device));
    }
    if (!roots.empty()) autograd::backward(roots, grads);
    for (const Tensor& t : inputs) r.grads.push_back(t.grad());
  }
  return r;
}

Arrays upstream_grads(const Arrays& ref_outputs, DType dtype, Generator& gen) {
  Arrays g;
  for (const reference::Array& o : ref_outputs) {
    Tensor t = randn(o.shape, gen, DType::kF64);
    g.push_back(to_array(core::cast(core::cast(t, dtype), DType::kF64)));
  }
  return g;
}

class OpSuite : public ::testing::TestWithParam<size_t> {
 protected:
  const OpCase& c() const { return all_cases()[GetParam()]; }
  Arrays make_values(DType dtype) const {
    Generator gen(hash_name(c().op() + "/" + c().name()));
    Arrays values;
    for (const InputSpec& spec : c().inputs()) values.push_back(generate_values(spec, dtype, gen));
    return values;
  }
};

TEST_P(OpSuite, ForwardMatchesFloat64Reference) {
  for (DType dtype : c().dtypes()) {
    SCOPED_TRACE(std::string("dtype ") + dtype_name(dtype));
    const Arrays values = make_values(dtype);
    const Arrays want = c().reference_fn()(values);
    const RunResult got = run(c(), values, dtype, nullptr);
    ASSERT_EQ(got.outputs.size(), want.size()) << "number of outputs";
    for (size_t o = 0; o < want.size(); ++o) {
      expect_close("output " + std::to_string(o), to_array(got.outputs[o]), want[o],
                   Tolerance::for_dtype(dtype, c().reduction_length()));
    }
  }
}

TEST_P(OpSuite, BackwardMatchesFloat64Backward) {
  if (!c().check_backward()) GTEST_SKIP() << "case has no backward";
  for (DType dtype : c().dtypes()) {
    SCOPED_TRACE(std::string("dtype ") + dtype_name(dtype));
    const Arrays values = make_values(dtype);
    Generator gen(hash_name(c().name()) + 1);
    const Arrays upstream = upstream_grads(c().reference_fn()(values), dtype, gen);
    const RunResult got = run(c(), values, dtype, &upstream);
    const RunResult want = run(c(), values, DType::kF64, &upstream);
    for (size_t i = 0; i < c().inputs().size(); ++i) {
      if (!c().inputs()[i].differentiable) continue;
      ASSERT_TRUE(got.grads[i].has_value()) << "no gradient reached input " << i;
      ASSERT_TRUE(want.grads[i].has_value()) << "no f64 gradient reached input " << i;
      EXPECT_EQ(got.grads[i]->dtype(), dtype) << "gradient dtype of input " << i;
      expect_close("grad of input " + std::to_string(i), to_array(*got.grads[i]),
                   to_array(*want.grads[i]), Tolerance::for_dtype(dtype, c().reduction_length()));
    }
  }
}

TEST_P(OpSuite, Float64BackwardMatchesFiniteDifferences) {
  if (!c().check_backward()) GTEST_SKIP() << "case has no backward";
  const Arrays values = make_values(DType::kF64);
  Generator gen(hash_name(c().name()) + 2);
  const Arrays upstream = upstream_grads(c().reference_fn()(values), DType::kF64, gen);
  const RunResult analytic = run(c(), values, DType::kF64, &upstream);

  // The op must really be in the recorded graph (catches a case labelled with the wrong op).
  const std::set<std::string> ops = graph_ops(analytic.outputs);
  EXPECT_TRUE(ops.count(c().op())) << "the forward did not record op '" << c().op() << "'";

  double loss_terms = 0.0;  // sum |upstream * output|: sets the roundoff floor of the check
  {
    const Arrays y = c().reference_fn()(values);
    for (size_t o = 0; o < y.size(); ++o)
      for (int64_t j = 0; j < y[o].numel(); ++j) loss_terms += std::fabs(upstream[o][j] * y[o][j]);
  }
  // L(x) = sum over outputs of <upstream, reference(x)>: dL/dx is what backward computed.
  auto loss = [&](const Arrays& x) {
    const Arrays y = c().reference_fn()(x);
    double l = 0.0;
    for (size_t o = 0; o < y.size(); ++o)
      for (int64_t j = 0; j < y[o].numel(); ++j) l += upstream[o][j] * y[o][j];
    return l;
  };
  for (size_t i = 0; i < c().inputs().size(); ++i) {
    if (!c().inputs()[i].differentiable) continue;
    ASSERT_TRUE(analytic.grads[i].has_value()) << "no gradient reached input " << i;
    const reference::Array an = to_array(*analytic.grads[i]);
    // Check every element of small inputs, a fixed random sample of large ones.
    const int64_t n = values[i].numel();
    std::vector<int64_t> sample;
    Generator pick(hash_name(c().name()) + 3 + i);
    if (n <= 96) {
      for (int64_t j = 0; j < n; ++j) sample.push_back(j);
    } else {
      const std::vector<int64_t> idx = to_vector<int64_t>(randint(0, n, Shape{96}, pick));
      sample.assign(idx.begin(), idx.end());
    }
    reference::Array fd(Shape{static_cast<int64_t>(sample.size())});
    reference::Array an_sampled(Shape{static_cast<int64_t>(sample.size())});
    for (size_t s = 0; s < sample.size(); ++s) {
      const int64_t j = sample[s];
      Arrays x = values;
      const double x0 = values[i][j];
      const double h = kFiniteDifferenceStep;
      auto at = [&](double v) {
        x[i][j] = v;
        return loss(x);
      };
      fd[static_cast<int64_t>(s)] =
          (-at(x0 + 2 * h) + 8 * at(x0 + h) - 8 * at(x0 - h) + at(x0 - 2 * h)) / (12 * h);
      an_sampled[static_cast<int64_t>(s)] = an[j];
    }
    expect_close("grad of input " + std::to_string(i) + " vs finite differences", an_sampled, fd,
                 Tolerance::finite_difference(loss_terms));
  }
}

TEST_P(OpSuite, ResultsDoNotDependOnThreadCount) {
  if (!c().deterministic()) GTEST_SKIP() << "op is documented as nondeterministic";
  const DType dtype = DType::kF32;
  const Arrays values = make_values(dtype);
  Generator gen(hash_name(c().name()) + 4);
  const Arrays upstream = upstream_grads(c().reference_fn()(values), dtype, gen);
  const int saved = num_threads();
  set_num_threads(1);
  const RunResult one = run(c(), values, dtype, c().check_backward() ? &upstream : nullptr);
  set_num_threads(2);
  const RunResult two = run(c(), values, dtype, c().check_backward() ? &upstream : nullptr);
  set_num_threads(saved);
  for (size_t o = 0; o < one.outputs.size(); ++o)
    EXPECT_EQ(to_vector<double>(one.outputs[o]), to_vector<double>(two.outputs[o])) << "output " << o;
  for (size_t i = 0; i < one.grads.size(); ++i)
    if (one.grads[i] && two.grads[i]) {
      EXPECT_EQ(to_vector<double>(*one.grads[i]), to_vector<double>(*two.grads[i])) << "grad " << i;
    }
}

// Note [The op suite on devices]
// The same cases, run with inputs on each device (in the same memory layouts), against the same
// float64 reference and float64 host backward, with the same tolerances: a device kernel is
// held to the accuracy of the host's. The emulated device (support/emulated_device.h: host
// memory and kernels behind the device tables) runs everywhere and checks the device paths of
// the front ends; a GPU runs where one is visible.
std::vector<Device> test_devices() {
  std::vector<Device> devices{emulated_device()};
  set_emulated_logits_row_multiple(64);  // the GPU's padded logits and vocabulary GEMMs (ops/loss.cc)
#ifdef TRIDENT_WITH_CUDA
  if (cuda::is_available()) devices.push_back(Device::cuda());
#endif
  return devices;
}

TEST_P(OpSuite, ForwardOnDevicesMatchesFloat64Reference) {
  if (c().host_only()) GTEST_SKIP() << "the op runs on the host only";
  for (Device device : test_devices()) {
    for (DType dtype : c().dtypes()) {
      SCOPED_TRACE(std::string("dtype ") + dtype_name(dtype) + " on " + device.str());
      const Arrays values = make_values(dtype);
      const Arrays want = c().reference_fn()(values);
      const RunResult got = run(c(), values, dtype, nullptr, device);
      ASSERT_EQ(got.outputs.size(), want.size()) << "number of outputs";
      for (size_t o = 0; o < want.size(); ++o) {
        EXPECT_EQ(got.outputs[o].device(), device) << "output " << o << " left the device";
        expect_close("output " + std::to_string(o), to_array(got.outputs[o]), want[o],
                     Tolerance::for_dtype(dtype, c().reduction_length()));
      }
    }
  }
}

TEST_P(OpSuite, BackwardOnDevicesMatchesFloat64Backward) {
  if (!c().check_backward()) GTEST_SKIP() << "case has no backward";
  if (c().host_only()) GTEST_SKIP() << "the op runs on the host only";
  for (Device device : test_devices()) {
    for (DType dtype : c().dtypes()) {
      SCOPED_TRACE(std::string("dtype ") + dtype_name(dtype) + " on " + device.str());
      const Arrays values = make_values(dtype);
      Generator gen(hash_name(c().name()) + 1);
      const Arrays upstream = upstream_grads(c().reference_fn()(values), dtype, gen);
      const RunResult got = run(c(), values, dtype, &upstream, device);
      const RunResult want = run(c(), values, DType::kF64, &upstream);
      for (size_t i = 0; i < c().inputs().size(); ++i) {
        if (!c().inputs()[i].differentiable) continue;
        ASSERT_TRUE(got.grads[i].has_value()) << "no gradient reached input " << i;
        EXPECT_EQ(got.grads[i]->device(), device) << "gradient of input " << i << " left the device";
        expect_close("grad of input " + std::to_string(i), to_array(*got.grads[i]), to_array(*want.grads[i]),
                     Tolerance::for_dtype(dtype, c().reduction_length()));
      }
    }
  }
}

std::string case_test_name(const ::testing::TestParamInfo<size_t>& info) {
  const OpCase& c = all_cases()[info.param];
  std::string name = std::to_string(info.param) + "_" + c.op() + "_" + c.name();
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Ops, OpSuite, ::testing::Range<size_t>(0, all_cases().size()), case_test_name);

// Every op is profiled under its registered name (core/profiler.h): its forward by the
// TRI_PROFILE_OP line of its function (autograd/op_scope.h), its backward node by the engine.
TEST_P(OpSuite, ProfilesItsForwardAndBackwardUnderItsName) {
  const DType dtype = c().dtypes().front();
  const Arrays values = make_values(dtype);
  Generator gen(hash_name(c().name()) + 3);
  const Arrays upstream = upstream_grads(c().reference_fn()(values), dtype, gen);
  profiler::ProfileSession session;
  (void)run(c(), values, dtype, c().check_backward() ? &upstream : nullptr);
  const profiler::ProfileReport r = session.stop();
  EXPECT_NE(r.find(c().op(), profiler::Phase::kForward), nullptr)
      << "op '" << c().op() << "' ran without a forward scope: add TRI_PROFILE_OP(<its OpDef>) as the first line "
      << "of its function\n" << r.table(100);
  if (c().check_backward()) {
    EXPECT_NE(r.find(c().op(), profiler::Phase::kBackward), nullptr) << r.table(100);
  }
}

TEST(OpSuiteCoverage, EveryRegisteredOpHasACase) {
  std::set<std::string> covered;
  for (const OpCase& c : all_cases()) covered.insert(c.op());
  for (const std::string& op : autograd::registered_ops())
    EXPECT_TRUE(covered.count(op)) << "op '" << op << "' is registered but has no op-suite case; "
                                   << "add one in tests/op_suite/cases_<family>.cc";
}

TEST(OpSuiteCoverage, EveryCaseNamesARegisteredOp) {
  const std::vector<std::string> ops = autograd::registered_ops();
  const std::set<std::string> registered(ops.begin(), ops.end());
  for (const OpCase& c : all_cases())
    EXPECT_TRUE(registered.count(c.op())) << "case '" << c.name() << "' names unknown op '" << c.op() << "'";
}

}  // namespace
}  // namespace trident::testing
