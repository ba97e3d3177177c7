// The GPU's multi-tensor kernels (kernels/cuda/multi_tensor.cu) against the single-tensor ones
// and the host, for tensors around the 65536-element chunk size, an empty one, and f32 and bf16:
// the fused AdamW step (also writing bf16/f16 copies of f32 parameters) and the
// one-synchronization sum of squares. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/copy.h"
#include "core/factory.h"
#include "core/rng.h"
#include "kernels/cuda/cuda_device.h"
#include "ops/optim.h"

namespace trident {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason()

const std::vector<int64_t> kSizes = {1, 0, 65535, 65536, 65537, 300000, 7};

std::vector<Tensor> random_tensors(uint64_t seed, DType dtype, Device device) {
  Generator gen(seed);
  std::vector<Tensor> out;
  for (int64_t n : kSizes) out.push_back(core::to_device(core::cast(randn({n}, gen), dtype), device));
  return out;
}
std::vector<Tensor> zero_tensors(Device device) {
  std::vector<Tensor> out;
  for (int64_t n : kSizes) out.push_back(zeros({n}, DType::kF32, device));
  return out;
}

TEST(CudaMultiTensor, AdamWMatchesTheSingleTensorKernelAndTheHost) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const Device gpu = Device::cuda();
    std::vector<Tensor> p1 = random_tensors(1, dtype, gpu), p2 = random_tensors(1, dtype, gpu),
                        ph = random_tensors(1, dtype, Device::cpu());
    const std::vector<Tensor> g = random_tensors(2, dtype, gpu), gh = random_tensors(2, dtype, Device::cpu());
    std::vector<Tensor> m1 = zero_tensors(gpu), v1 = zero_tensors(gpu), m2 = zero_tensors(gpu), v2 = zero_tensors(gpu),
                        mh = zero_tensors(Device::cpu()), vh = zero_tensors(Device::cpu());
    for (int64_t t = 1; t <= 3; ++t) {
      const kernels::cpu::AdamWStep s{1e-3, 0.9, 0.95, 1e-8, 0.1, t};
      for (size_t k = 0; k < p1.size(); ++k) ops::adamw_update_(p1[k], g[k], m1[k], v1[k], s);
      ops::adamw_update_multi_(p2, g, m2, v2, s);
      ops::adamw_update_multi_(ph, gh, mh, vh, s);
    }
    for (size_t k = 0; k < p1.size(); ++k) {
      const std::vector<float> a = to_vector<float>(p1[k]), b = to_vector<float>(p2[k]), h = to_vector<float>(ph[k]);
      const double tol = dtype == DType::kF32 ? 1e-6 : 1e-2;
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(b[i], a[i]) << dtype << ", tensor " << k << ", element " << i << ": multi vs single kernel";
        ASSERT_NEAR(b[i], h[i], tol * std::max(1.0f, std::abs(h[i]))) << dtype << ", tensor " << k << ", element " << i;
      }
    }
  }
}

// Mixed precision's fused step (Note [AdamW into the model]): f32 parameters updated with the
// multi-tensor kernel's bits while the same launch writes them, rounded, into bf16/f16 tensors
// with the bits of the cast kernel.
TEST(CudaMultiTensor, AdamWIntoBf16AndF16GivesTheUpdateThenCastBits) {
  SKIP_WITHOUT_GPU();
  const Device gpu = Device::cuda();
  for (DType out_dtype : {DType::kBF16, DType::kF16}) {
    std::vector<Tensor> p1 = random_tensors(1, DType::kF32, gpu), p2 = random_tensors(1, DType::kF32, gpu);
    const std::vector<Tensor> g = random_tensors(2, DType::kF32, gpu);
    std::vector<Tensor> m1 = zero_tensors(gpu), v1 = zero_tensors(gpu), m2 = zero_tensors(gpu), v2 = zero_tensors(gpu);
    std::vector<Tensor> outs;
    for (const Tensor& p : p2) outs.push_back(zeros(p.shape(), out_dtype, gpu));
    for (int64_t t = 1; t <= 3; ++t) {
      const kernels::cpu::AdamWStep s{1e-3, 0.9, 0.95, 1e-8, 0.1, t};
      ops::adamw_update_multi_(p1, g, m1, v1, s);
      ops::adamw_update_multi_(p2, g, m2, v2, s, outs);
    }
    for (size_t k = 0; k < p1.size(); ++k) {
      EXPECT_EQ(to_vector<float>(p2[k]), to_vector<float>(p1[k])) << out_dtype << ", tensor " << k;
      EXPECT_EQ(to_vector<float>(m2[k]), to_vector<float>(m1[k])) << out_dtype << ", tensor " << k;
      EXPECT_EQ(to_vector<float>(v2[k]), to_vector<float>(v1[k])) << out_dtype << ", tensor " << k;
      EXPECT_EQ(to_vector<float>(outs[k]), to_vector<float>(core::cast(p1[k], out_dtype)))
          << out_dtype << ", tensor " << k;
    }
  }
}

TEST(CudaMultiTensor, SumOfSquaresMatchesTheHost) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const std::vector<Tensor> host = random_tensors(5, dtype, Device::cpu());
    std::vector<Tensor> gpu;
    for (const Tensor& t : host) gpu.push_back(core::to_device(t, Device::cuda()));
    const double want = ops::sum_of_squares(host);
    EXPECT_NEAR(ops::sum_of_squares(gpu), want, 1e-12 * want) << dtype;
  }
}

}  // namespace
}  // namespace trident
