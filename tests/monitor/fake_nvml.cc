// A stand-in for libnvidia-ml.so.1 with the entry points monitor/nvml.cc calls and NVML's C
// signatures, so that the loader and the gauges are tested without a GPU (nvml_test.cc).
// Two GPUs: index i (UUID "GPU-fake-<i>") is busy 40 + i %, uses (i + 1) GiB of 80 GiB and
// draws 250.5 + i W; GPU 1 reports no power (NVML_ERROR_NOT_SUPPORTED, 3), as some do.
// FAKE_NVML_INIT_RC=<n> makes nvmlInit_v2 return n.
#include <cstdlib>
#include <cstring>

namespace {

struct FakeGpu {
  unsigned index;
};
FakeGpu g_gpus[2] = {{0}, {1}};
int g_live = 0;  // nvmlInit_v2 calls minus nvmlShutdown calls

}  // namespace

extern "C" {

struct nvmlUtilization_t {
  unsigned int gpu, memory;
};
struct nvmlMemory_t {
  unsigned long long total, free, used;
};

__attribute__((visibility("default"))) int nvmlInit_v2() {
  if (const char* rc = std::getenv("FAKE_NVML_INIT_RC")) return std::atoi(rc);
  ++g_live;
  return 0;
}

__attribute__((visibility("default"))) int nvmlShutdown() {
  --g_live;
  return 0;
}

__attribute__((visibility("default"))) const char* nvmlErrorString(int rc) {
  switch (rc) {
    case 2:
      return "Invalid Argument";
    case 3:
      return "Not Supported";
    case 9:
      return "Driver Not Loaded";
    default:
      return "Unknown Error";
  }
}

__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned int index,
                                                                         void** device) {
  if (g_live <= 0) return 1;  // NVML_ERROR_UNINITIALIZED
  if (index >= 2) return 2;
  *device = &g_gpus[index];
  return 0;
}

__attribute__((visibility("default"))) int nvmlDeviceGetHandleByUUID(const char* uuid,
                                                                     void** device) {
  for (FakeGpu& g : g_gpus) {
    const char* names[] = {"GPU-fake-0", "GPU-fake-1"};
    if (std::strcmp(uuid, names[g.index]) == 0) {
      *device = &g;
      return 0;
    }
  }
  return 2;
}

__attribute__((visibility("default"))) int nvmlDeviceGetUtilizationRates(void* device,
                                                                         nvmlUtilization_t* u) {
  const unsigned i = static_cast<FakeGpu*>(device)->index;
  u->gpu = 40 + i;
  u->memory = 7;
  return 0;
}

__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(void* device, nvmlMemory_t* m) {
  const unsigned i = static_cast<FakeGpu*>(device)->index;
  m->total = 80ull << 30;
  m->used = (i + 1ull) << 30;
  m->free = m->total - m->used;
  return 0;
}

__attribute__((visibility("default"))) int nvmlDeviceGetPowerUsage(void* device,
                                                                   unsigned int* milliwatts) {
  const unsigned i = static_cast<FakeGpu*>(device)->index;
  if (i == 1) return 3;
  *milliwatts = 250500 + 1000 * i;
  return 0;
}

}  // extern "C"
