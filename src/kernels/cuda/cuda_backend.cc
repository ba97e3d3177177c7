// The CUDA backend's place in the core (issue #7): a caching allocator over cudaMalloc for
// DeviceType::kCUDA (core/caching_allocator.h: pools per stream and size class, so training's
// steady state makes no cudaMalloc; out of memory names the request and the pools), and
// DeviceOps: copies between host and device (cudaMemcpy with unified addressing) and fills.
// Registered at start-up; this library is linked whole-archive so that the registration is
// never dropped. Device 0 only for now.
#include <cuda_runtime.h>

#include <memory>

#include "core/allocator.h"
#include "core/caching_allocator.h"
#include "core/device_ops.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/fill.cuh"

namespace trident::cuda {
namespace {

class CudaMemory final : public MemorySource {
 public:
  void* allocate(size_t nbytes) override {
    TRI_CHECK_NOT_IMPLEMENTED(is_available(), "no CUDA device is visible to allocate ", nbytes, " bytes on (",
                              unavailable_reason(), ")");
    void* ptr = nullptr;
    const cudaError_t err = cudaMalloc(&ptr, nbytes);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // the caching allocator frees its pools and retries, or reports
      return nullptr;
    }
    TRI_CUDA_CHECK(err);
    return ptr;
  }
  void free(void* ptr) override { cudaFree(ptr); }  // at exit the driver may be gone: no throw
  Device device() const override { return Device::cuda(0); }
};

void copy(void* dst, Device, const void* src, Device, size_t nbytes) {
  TRI_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyDefault));
}

void fill(void* dst, DType dtype, int64_t n, double value) {
  launch_fill(dst, static_cast<int>(dtype), n, value);
  TRI_CUDA_CHECK(cudaGetLastError());
  TRI_CUDA_CHECK(cudaDeviceSynchronize());
}

const bool registered = [] {
  // Leaked on purpose, like the host allocator: tensors in static storage may outlive it.
  static CachingAllocator* allocator = new CachingAllocator(std::make_unique<CudaMemory>());
  register_device_allocator(DeviceType::kCUDA, allocator);
  register_device_ops(DeviceType::kCUDA, DeviceOps{&copy, &fill});
  return true;
}();

}  // namespace
}  // namespace trident::cuda
