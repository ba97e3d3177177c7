// Optimizer primitives (ops/optim.h): AdamW against a float64 transcription of
// torch.optim.AdamW over several steps; the multi-tensor update gives the single-tensor
// updates' bits, on the host and on the emulated device, also when it writes each updated
// parameter into a bf16/f16 copy (a cast's bits); the AVX-512 path agrees with the
// scalar one (on CPUs that have it: the GPU machines run this test too); the sum of squares
// of tensors of mixed dtypes and devices equals the float64 sum.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/copy.h"
#include "core/factory.h"
#include "core/rng.h"
#include "kernels/cpu/adamw.h"
#include "ops/optim.h"
#include "support/emulated_device.h"

namespace trident {
namespace {

kernels::cpu::AdamWStep step_of(int64_t t, double weight_decay) { return {1e-2, 0.9, 0.95, 1e-8, weight_decay, t}; }

TEST(AdamWOp, FollowsTorchAdamWInFloat64) {
  Generator gen(3);
  const int64_t n = 1000;
  Tensor p = randn({n}, gen), m = zeros({n}), v = zeros({n});
  std::vector<double> pr = to_vector<double>(core::cast(p, DType::kF64)), mr(n, 0.0), vr(n, 0.0);
  for (int64_t t = 1; t <= 5; ++t) {
    const Tensor g = randn({n}, gen);
    const std::vector<float> gv = to_vector<float>(g);
    const kernels::cpu::AdamWStep s = step_of(t, 0.1);
    ops::adamw_update_(p, g, m, v, s);
    for (int64_t i = 0; i < n; ++i) {  // torch.optim.AdamW, decoupled weight decay first
      pr[i] *= 1.0 - s.lr * s.weight_decay;
      mr[i] = s.beta1 * mr[i] + (1.0 - s.beta1) * gv[i];
      vr[i] = s.beta2 * vr[i] + (1.0 - s.beta2) * gv[i] * gv[i];
      const double bc1 = 1.0 - std::pow(s.beta1, t), bc2 = 1.0 - std::pow(s.beta2, t);
      pr[i] -= s.lr / bc1 * mr[i] / (std::sqrt(vr[i]) / std::sqrt(bc2) + s.eps);
    }
  }
  const std::vector<float> got = to_vector<float>(p);
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], pr[i], 2e-6 * std::max(1.0, std::abs(pr[i]))) << i;
}

struct Params {
  std::vector<Tensor> p, g, m, v;
};
// Parameters of awkward sizes (an empty one too) with their gradients and state, on `device`.
Params params(Device device) {
  Generator gen(9);
  Params out;
  for (int64_t n : {int64_t{1}, int64_t{0}, int64_t{70000}, int64_t{33}, int64_t{65536}}) {
    out.p.push_back(core::to_device(randn({n}, gen), device));
    out.g.push_back(core::to_device(randn({n}, gen), device));
    out.m.push_back(core::to_device(zeros({n}), device));
    out.v.push_back(core::to_device(zeros({n}), device));
  }
  return out;
}
std::vector<std::vector<float>> values(const std::vector<Tensor>& ts) {
  std::vector<std::vector<float>> out;
  for (const Tensor& t : ts) out.push_back(to_vector<float>(t));
  return out;
}

TEST(AdamWOp, MultiTensorUpdateGivesTheSingleUpdatesBits) {
  for (const Device device : {Device::cpu(), testing::emulated_device()}) {
    Params one = params(device), many = params(device);
    for (int64_t t = 1; t <= 3; ++t) {
      for (size_t k = 0; k < one.p.size(); ++k) ops::adamw_update_(one.p[k], one.g[k], one.m[k], one.v[k], step_of(t, 0.1));
      ops::adamw_update_multi_(many.p, many.g, many.m, many.v, step_of(t, 0.1));
    }
    EXPECT_EQ(values(many.p), values(one.p)) << device;
    EXPECT_EQ(values(many.m), values(one.m)) << device;
    EXPECT_EQ(values(many.v), values(one.v)) << device;
  }
  Params dev = params(testing::emulated_device());  // the device's update is the host's
  ops::adamw_update_multi_(dev.p, dev.g, dev.m, dev.v, step_of(1, 0.1));
  Params again = params(Device::cpu());
  ops::adamw_update_multi_(again.p, again.g, again.m, again.v, step_of(1, 0.1));
  EXPECT_EQ(values(dev.p), values(again.p));
}

// With outs, each updated f32 parameter also goes into a bf16 or f16 tensor (on a device in
// the update's own launch): the bits of the update then a cast, and the parameters and state
// of the update alone. An out the kernel cannot write (f32, here) is copied after the update.
TEST(AdamWOp, MultiTensorUpdateIntoOutsGivesTheUpdateThenCastBits) {
  for (const Device device : {Device::cpu(), testing::emulated_device()}) {
    for (const DType dtype : {DType::kBF16, DType::kF16}) {
      Params plain = params(device), into = params(device);
      std::vector<Tensor> outs;
      for (size_t k = 0; k < into.p.size(); ++k)
        outs.push_back(zeros(into.p[k].shape(), k == 3 ? DType::kF32 : dtype, device));
      for (int64_t t = 1; t <= 3; ++t) {
        ops::adamw_update_multi_(plain.p, plain.g, plain.m, plain.v, step_of(t, 0.1));
        ops::adamw_update_multi_(into.p, into.g, into.m, into.v, step_of(t, 0.1), outs);
      }
      EXPECT_EQ(values(into.p), values(plain.p)) << device << ", " << dtype;
      EXPECT_EQ(values(into.m), values(plain.m)) << device << ", " << dtype;
      EXPECT_EQ(values(into.v), values(plain.v)) << device << ", " << dtype;
      for (size_t k = 0; k < outs.size(); ++k) {
        EXPECT_EQ(outs[k].dtype(), k == 3 ? DType::kF32 : dtype);
        EXPECT_EQ(to_vector<float>(outs[k]), to_vector<float>(core::cast(plain.p[k], outs[k].dtype())))
            << device << ", " << dtype << ", tensor " << k;
      }
    }
  }
  Params ps = params(Device::cpu());
  std::vector<Tensor> wrong = {zeros({2}, DType::kBF16), zeros({0}), zeros({70000}), zeros({33}), zeros({65536})};
  try {
    ops::adamw_update_multi_(ps.p, ps.g, ps.m, ps.v, step_of(1, 0.0), wrong);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("copied into a tensor of shape"), std::string::npos) << e.what();
  }
}

TEST(AdamWOp, Avx512PathAgreesWithTheScalarPath) {
  if (!kernels::cpu::adamw_uses_avx512())
    GTEST_SKIP() << "this CPU has no AVX-512F (or TRIDENT_CPU_AVX512=0): the scalar path runs here";
  Generator gen(6);
  const int64_t n = 100003;  // not a multiple of 16: the tail takes the scalar code
  std::vector<std::vector<float>> p(2, to_vector<float>(randn({n}, gen))), m(2, std::vector<float>(n, 0.0f)),
      v(2, std::vector<float>(n, 0.0f));
  for (int64_t t = 1; t <= 3; ++t) {
    const std::vector<float> g = to_vector<float>(randn({n}, gen));
    for (int path = 0; path < 2; ++path)
      kernels::cpu::adamw_update_f32(p[path].data(), g.data(), m[path].data(), v[path].data(), n, step_of(t, 0.1),
                                     path == 1);
  }
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(p[1][i], p[0][i], 1e-6f * std::max(1.0f, std::abs(p[0][i]))) << i;
    ASSERT_NEAR(v[1][i], v[0][i], 1e-6f * std::abs(v[0][i])) << i;
  }
}

TEST(AdamWOp, MultiTensorListsOfDifferentLengthsAreAClearError) {
  Params ps = params(Device::cpu());
  ps.v.pop_back();
  try {
    ops::adamw_update_multi_(ps.p, ps.g, ps.m, ps.v, step_of(1, 0.0));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("5 parameters, 5 gradients, 5 exp_avg and 4 exp_avg_sq"), std::string::npos)
        << e.what();
  }
}

TEST(SumOfSquaresOp, MixedDtypesAndDevicesGiveTheFloat64Sum) {
  Generator gen(4);
  const Device dev = testing::emulated_device();
  std::vector<Tensor> ts = {randn({1000}, gen), core::cast(randn({70000}, gen), DType::kBF16), randn({0}, gen),
                            randn({65537}, gen)};
  double want = 0.0;
  for (const Tensor& t : ts)
    for (double x : to_vector<double>(core::cast(t, DType::kF64))) want += x * x;
  EXPECT_NEAR(ops::sum_of_squares(ts), want, 1e-12 * want);
  std::vector<Tensor> mixed = {ts[0], core::to_device(ts[1], dev), core::to_device(ts[2], dev),
                               core::to_device(ts[3], dev)};
  EXPECT_NEAR(ops::sum_of_squares(mixed), want, 1e-12 * want);
}

}  // namespace
}  // namespace trident
