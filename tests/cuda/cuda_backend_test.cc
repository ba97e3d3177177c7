// The CUDA backend's memory and copies (issue #7). On a machine without a GPU, the GPU tests
// skip saying why, and a CUDA tensor is a clear error; with one, tensors round-trip between
// host and device in every dtype, fills land, the caching allocator makes no cudaMalloc in a
// steady state, and running out of device memory names the request and the pools.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/copy.h"
#include "core/factory.h"
#include "kernels/cuda/cuda_device.h"

namespace trident {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason()

TEST(CudaBackend, WithoutAGpuACudaTensorIsAClearError) {
  if (cuda::is_available()) GTEST_SKIP() << "this machine has a GPU";
  try {
    empty({4}, DType::kF32, Device::cuda());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device is visible"), std::string::npos) << e.what();
  }
}

TEST(CudaBackend, TensorsRoundTripInEveryDtype) {
  SKIP_WITHOUT_GPU();
  const Tensor host = from_vector(std::vector<float>{1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, 7.0f}, Shape{2, 3});
  for (DType dtype : kAllDTypes) {
    const Tensor src = core::cast(host, dtype);
    const Tensor dev = core::to_device(src, Device::cuda());
    EXPECT_TRUE(dev.device().is_cuda());
    const Tensor back = core::to_device(dev, Device::cpu());
    EXPECT_EQ(to_vector<double>(core::cast(back, DType::kF64)), to_vector<double>(core::cast(src, DType::kF64)))
        << dtype_name(dtype);
  }
}

TEST(CudaBackend, FillWritesEveryElement) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : kAllDTypes) {
    const Tensor dev = empty({1000003}, dtype, Device::cuda());
    fill_(dev, 3.0);
    const std::vector<double> v = to_vector<double>(core::cast(core::to_device(dev, Device::cpu()), DType::kF64));
    EXPECT_EQ(v.front(), 3.0) << dtype_name(dtype);
    EXPECT_EQ(v.back(), 3.0) << dtype_name(dtype);
  }
}

TEST(CudaBackend, PinnedHostMemoryIsPageLockedAndCopiesBothWays) {
  SKIP_WITHOUT_GPU();
  const Tensor host = core::cast(from_vector(std::vector<float>{1.5f, -2.0f, 3.25f, 7.0f}, Shape{2, 2}), DType::kBF16);
  const Tensor pinned = core::pin_memory(host);
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, pinned.raw_data()), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeHost) << "pin_memory did not give page-locked memory";
  const Tensor dev = core::to_device(pinned, Device::cuda());
  const Tensor back = core::pin_memory(dev);  // device -> pinned host in one copy
  EXPECT_EQ(to_vector<float>(back), to_vector<float>(host));
  // Converting copies stage through pinned memory: f32 host -> bf16 device -> f32 host.
  const Tensor f32 = from_vector(std::vector<float>{0.5f, 1.0f, -4.0f, 8.0f}, Shape{2, 2});
  const Tensor bf = empty({2, 2}, DType::kBF16, Device::cuda());
  core::copy_(bf, f32);
  EXPECT_EQ(to_vector<float>(bf), to_vector<float>(f32));
}

TEST(CudaBackend, TheSteadyStateMakesNoCudaMalloc) {
  SKIP_WITHOUT_GPU();
  Allocator& a = *device_allocator(DeviceType::kCUDA);
  auto step = [] {
    std::vector<Tensor> t;
    for (int64_t n : {1 << 20, 1 << 20, 4096, 123457}) t.push_back(empty({n}, DType::kF32, Device::cuda()));
  };
  step();
  const int64_t system = a.stats().num_system_allocs;
  for (int i = 0; i < 10; ++i) step();
  EXPECT_EQ(a.stats().num_system_allocs, system);
}

TEST(CudaBackend, OutOfMemoryNamesTheRequestAndThePools) {
  SKIP_WITHOUT_GPU();
  try {
    empty({int64_t{1} << 42}, DType::kF32, Device::cuda());  // 16 TiB
    FAIL() << "expected out of memory";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("Out of cuda:0 memory allocating 17592186044416 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("allocator state"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace trident
