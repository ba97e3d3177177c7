#include "kernels/cuda/cuda_device.h"

#include <cuda_runtime.h>

namespace trident::cuda {
namespace {

struct Probe {
  int count = 0;
  std::string reason;
};

const Probe& probe() {
  static const Probe p = [] {
    Probe r;
    const cudaError_t err = cudaGetDeviceCount(&r.count);
    if (err != cudaSuccess) {
      r.count = 0;
      r.reason = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err);
      cudaGetLastError();  // clear it: later calls must not see a stale error
    } else if (r.count == 0) {
      r.reason = "cudaGetDeviceCount: no CUDA device";
    }
    return r;
  }();
  return p;
}

}  // namespace

int device_count() { return probe().count; }
bool is_available() { return device_count() > 0; }
std::string unavailable_reason() { return probe().reason; }

}  // namespace trident::cuda
