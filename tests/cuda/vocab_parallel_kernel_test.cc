// The GPU's vocabulary-parallel cross-entropy passes (kernels/cuda/vocab_parallel_cross_entropy.cu)
// against the host's (tests/ops/vocab_parallel_test.cc checks those against float64), on a
// shard that holds some rows' targets and not others', with ignored rows, for a small and a
// GPT-2-sized vocabulary shard. Skips without a GPU.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "core/copy.h"
#include "core/factory.h"
#include "core/rng.h"
#include "kernels/cuda/cuda_device.h"
#include "ops/optim.h"
#include "ops/vocab_parallel.h"

namespace trident {
namespace {

TEST(CudaVocabParallel, PassesMatchTheHost) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason();
  for (const auto [N, V, begin] : std::vector<std::array<int64_t, 3>>{{37, 67, 30}, {64, 25133, 25124}}) {
    Generator gen(5);
    const Tensor logits = randn({N, V}, gen);
    ops::scale_(logits, 4.0);
    std::vector<int64_t> t = to_vector<int64_t>(randint(0, 2 * V, {N}, gen));  // about half in this shard
    for (int64_t i = 0; i < N; ++i) t[static_cast<size_t>(i)] = i % 7 == 0 ? -1 : t[static_cast<size_t>(i)] + begin - V / 2;
    const Tensor targets = from_vector(t, {N});
    const Device gpu = Device::cuda();
    const Tensor l_gpu = core::to_device(logits, gpu), t_gpu = core::to_device(targets, gpu);

    const Tensor max_host = ops::vocab_parallel_row_max(logits);
    EXPECT_EQ(to_vector<float>(ops::vocab_parallel_row_max(l_gpu)), to_vector<float>(max_host)) << "V " << V;
    const Tensor sums_host = ops::vocab_parallel_sums(logits, max_host, targets, begin);
    const std::vector<double> sh = to_vector<double>(sums_host);
    const std::vector<double> sg =
        to_vector<double>(ops::vocab_parallel_sums(l_gpu, core::to_device(max_host, gpu), t_gpu, begin));
    // Float exponentials (the device's expf within 2 ulp, the host's math::exp within 1) summed in
    // double: a few ulp of float apart at most.
    for (size_t i = 0; i < sh.size(); ++i) ASSERT_NEAR(sg[i], sh[i], 5e-7 * std::max(1.0, std::abs(sh[i]))) << i;
    const std::vector<float> gh = to_vector<float>(ops::vocab_parallel_backward(logits, max_host, sums_host, targets,
                                                                                begin, -1, 0.25));
    const std::vector<float> gg = to_vector<float>(ops::vocab_parallel_backward(
        l_gpu, core::to_device(max_host, gpu), core::to_device(sums_host, gpu), t_gpu, begin, -1, 0.25));
    for (size_t i = 0; i < gh.size(); ++i) ASSERT_NEAR(gg[i], gh[i], 1e-7) << "V " << V << ", element " << i;
  }
}

TEST(CudaVocabParallel, LocalIdsMatchTheHost) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason();
  Generator gen(7);
  const Tensor ids = randint(0, 50257, {4, 1024}, gen);
  const ops::LocalIds host = ops::vocab_parallel_local_ids(ids, 25129, 25128);
  const ops::LocalIds gpu = ops::vocab_parallel_local_ids(core::to_device(ids, Device::cuda()), 25129, 25128);
  EXPECT_EQ(to_vector<int64_t>(gpu.local), to_vector<int64_t>(host.local));
  EXPECT_EQ(to_vector<float>(gpu.mask), to_vector<float>(host.mask));
}

}  // namespace
}  // namespace trident
