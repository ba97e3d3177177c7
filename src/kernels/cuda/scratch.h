// Scratch memory for the .cu launchers, from trident's caching device allocator: reused across
// steps, counted in its statistics, and running out first frees cached blocks, then throws
// naming the request and the pools. Ordered on stream 0 like the kernels, so freeing right
// after queueing the kernels that use it is safe. Defined in cuda_backend.cc. Throws on
// failure and otherwise returns cudaSuccess (cudaMallocAsync's shape, so call sites read the
// same).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace trident::cuda {

cudaError_t scratch_malloc(void** ptr, size_t bytes);
void scratch_free(void* ptr);
template <class T>
cudaError_t scratch_malloc(T** ptr, size_t bytes) {
  return scratch_malloc(reinterpret_cast<void**>(ptr), bytes);
}

}  // namespace trident::cuda
