// The CUDA backend's place in the core (issue #7): a caching allocator over cudaMalloc for
// DeviceType::kCUDA (core/caching_allocator.h: pools per stream and size class, so training's
// steady state makes no cudaMalloc; out of memory names the request and the pools), and
// DeviceOps: copies between host and device (cudaMemcpy with unified addressing), strided and
// converting copies on the device, fills, synchronize and the external profiler's range
// (cudaProfilerStart/Stop); the pinned host allocator
// (cudaHostAlloc) behind core's pinned_host_allocator(); and the launchers' scratch memory.
// Registered at start-up; this library is linked whole-archive so that the registration is
// never dropped. Device 0 only for now; every kernel runs on the default stream.
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/allocator.h"
#include "core/caching_allocator.h"
#include "core/device_ops.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/fill.cuh"
#include "kernels/cuda/scratch.h"

namespace trident::cuda {
namespace {

// Device memory from cudaMalloc, optionally capped: TRIDENT_CUDA_MEMORY_LIMIT_MB makes the GPU
// look smaller (as torch.cuda.set_per_process_memory_fraction), e.g. to show that
// ZeRO-Offload trains a model whose optimizer state would not fit.
class CudaMemory final : public MemorySource {
 public:
  CudaMemory() {
    if (const char* mb = std::getenv("TRIDENT_CUDA_MEMORY_LIMIT_MB")) limit_ = static_cast<size_t>(std::atof(mb) * 1048576.0);
  }
  void* allocate(size_t nbytes) override {
    TRI_CHECK_NOT_IMPLEMENTED(is_available(), "no CUDA device is visible to allocate ", nbytes, " bytes on (",
                              unavailable_reason(), ")");
    std::lock_guard<std::mutex> lock(mutex_);
    if (limit_ > 0 && held_ + nbytes > limit_) return nullptr;  // as out of memory: free the pools, retry, report
    void* ptr = nullptr;
    const cudaError_t err = cudaMalloc(&ptr, nbytes);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // the caching allocator frees its pools and retries, or reports
      return nullptr;
    }
    TRI_CUDA_CHECK(err);
    sizes_[ptr] = nbytes;
    held_ += nbytes;
    return ptr;
  }
  void free(void* ptr) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = sizes_.find(ptr);
      if (it != sizes_.end()) {
        held_ -= it->second;
        sizes_.erase(it);
      }
    }
    cudaFree(ptr);  // at exit the driver may be gone: no throw
  }
  Device device() const override { return Device::cuda(0); }
  // The cap, else the GPU's memory (asked once): what memory_high compares reserved bytes with.
  int64_t limit() const override {
    if (limit_ > 0) return static_cast<int64_t>(limit_);
    if (!is_available()) return 0;
    std::call_once(total_once_, [this] {
      size_t free = 0, total = 0;
      if (cudaMemGetInfo(&free, &total) == cudaSuccess) total_ = total;
      else cudaGetLastError();  // no limit known; not an error for the run
    });
    return static_cast<int64_t>(total_);
  }

 private:
  std::mutex mutex_;
  std::unordered_map<void*, size_t> sizes_;
  size_t held_ = 0, limit_ = 0;  // bytes from cudaMalloc now; the cap (0: none)
  mutable std::once_flag total_once_;
  mutable size_t total_ = 0;
};

// Page-locked host memory (cudaHostAlloc) for core's pinned_host_allocator(); plain aligned
// host memory where no GPU is visible, so a CPU-only run of a CUDA build is unaffected.
class PinnedHostMemory final : public MemorySource {
 public:
  void* allocate(size_t nbytes) override {
    if (!is_available()) {
      void* p = std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
      std::lock_guard<std::mutex> lock(mutex_);
      plain_.emplace(p, true);
      return p;
    }
    void* ptr = nullptr;
    if (cudaHostAlloc(&ptr, nbytes, cudaHostAllocDefault) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;  // the caching allocator frees its pools and retries, or reports
    }
    return ptr;
  }
  void free(void* ptr) override {
    bool plain = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      plain = plain_.erase(ptr) > 0;
    }
    if (plain) std::free(ptr);
    else cudaFreeHost(ptr);  // at exit the driver may be gone: no throw
  }
  Device device() const override { return Device::cpu(); }

 private:
  std::mutex mutex_;
  std::unordered_map<void*, bool> plain_;
};

void copy(void* dst, Device, const void* src, Device, size_t nbytes) {
  TRI_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyDefault));
}

// Copies that overlap compute (copy_async): a non-blocking stream of their own, so the legacy
// default stream the kernels run on does not serialize with it; each copy waits for the kernels
// queued before it through an event.
cudaStream_t copy_stream() {
  static cudaStream_t stream = [] {
    cudaStream_t s = nullptr;
    TRI_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
  }();
  return stream;
}

void copy_async(void* dst, Device, const void* src, Device, size_t nbytes) {
  cudaEvent_t ready = nullptr;
  TRI_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  TRI_CUDA_CHECK(cudaEventRecord(ready, nullptr));
  TRI_CUDA_CHECK(cudaStreamWaitEvent(copy_stream(), ready, 0));
  cudaEventDestroy(ready);  // released once the recorded work completes
  TRI_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, copy_stream()));
}

void wait_copies() { TRI_CUDA_CHECK(cudaStreamSynchronize(copy_stream())); }

void fill(void* dst, DType dtype, int64_t n, double value) {
  launch_fill(dst, static_cast<int>(dtype), n, value);
  TRI_CUDA_CHECK(cudaGetLastError());  // stream-ordered: later kernels and copies see the values
}

void copy_strided(void* dst, DType dst_dtype, const int64_t* dst_strides, const void* src, DType src_dtype,
                  const int64_t* src_strides, const int64_t* shape, int ndim) {
  TRI_CHECK_NOT_IMPLEMENTED(ndim <= kMaxDims, "copy on cuda: ", ndim, " dims after merging (at most ", kMaxDims, ")");
  launch_copy_strided(dst, static_cast<int>(dst_dtype), dst_strides, src, static_cast<int>(src_dtype), src_strides,
                      shape, ndim);
  TRI_CUDA_CHECK(cudaGetLastError());
}

CachingAllocator& allocator() {
  // Leaked on purpose, like the host allocator: tensors in static storage may outlive it.
  static CachingAllocator* a = new CachingAllocator(std::make_unique<CudaMemory>());
  return *a;
}

// Scratch handed to the .cu launchers by address: the owning DataPtrs wait here until freed.
std::mutex g_scratch_mutex;
std::unordered_map<void*, DataPtr>& scratch_blocks() {
  static auto* blocks = new std::unordered_map<void*, DataPtr>();
  return *blocks;
}

void synchronize() { TRI_CUDA_CHECK(cudaDeviceSynchronize()); }

// Without a profiler attached these return cudaSuccess and do nothing.
void profiler_range(bool start) { TRI_CUDA_CHECK(start ? cudaProfilerStart() : cudaProfilerStop()); }

const bool registered = [] {
  // Leaked on purpose, like the host allocator: tensors in static storage may outlive it.
  register_device_allocator(DeviceType::kCUDA, &allocator());
  static CachingAllocator* pinned = new CachingAllocator(std::make_unique<PinnedHostMemory>());  // leaked, as above
  register_pinned_host_allocator(pinned);
  register_device_ops(DeviceType::kCUDA,
                      DeviceOps{&copy, &fill, &copy_strided, &synchronize, &copy_async, &wait_copies, &profiler_range});
  return true;
}();

}  // namespace

cudaError_t scratch_malloc(void** ptr, size_t bytes) {
  DataPtr block = allocator().allocate(std::max<size_t>(bytes, 1), MemoryCategory::kOther);
  *ptr = block.get();
  std::lock_guard<std::mutex> lock(g_scratch_mutex);
  scratch_blocks().emplace(*ptr, std::move(block));
  return cudaSuccess;
}

void scratch_free(void* ptr) {
  if (ptr == nullptr) return;
  DataPtr block;
  {
    std::lock_guard<std::mutex> lock(g_scratch_mutex);
    auto it = scratch_blocks().find(ptr);
    if (it == scratch_blocks().end()) return;
    block = std::move(it->second);
    scratch_blocks().erase(it);
  }
}  // block returns to the allocator's stream-0 pool here

}  // namespace trident::cuda
