// GPU figures from NVML, the library behind nvidia-smi: utilisation, memory used and total,
// power. The library is loaded with dlopen when a run starts, never linked, so a build or a
// host without the NVIDIA driver works the same, only without these gauges (the caller logs
// the reason once). The few entry points used are declared here with NVML's documented C
// signatures (nvml.h is not needed to build).
//
// Note [NVML device order]
// NVML numbers GPUs in PCI bus order; CUDA numbers them fastest first unless
// CUDA_DEVICE_ORDER=PCI_BUS_ID, and only those in CUDA_VISIBLE_DEVICES. nvml_index_of() maps a
// CUDA device index through CUDA_VISIBLE_DEVICES (indices or GPU-... UUIDs); with several
// kinds of GPU in one host, set CUDA_DEVICE_ORDER=PCI_BUS_ID so both orders agree.
//
// Thread-safe as NVML is (the monitor samples from the training thread only).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/status.h"
#include "monitor/registry.h"

namespace trident::monitor {

inline constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";

struct GpuSample {
  double utilization_ratio = 0.0;  // of the last sample period the GPU was busy (0..1)
  int64_t memory_used_bytes = 0, memory_total_bytes = 0;
  std::optional<double> power_watts;  // not every GPU reports it
};

// Which GPU: an NVML index, or a UUID ("GPU-...") when CUDA_VISIBLE_DEVICES names one.
struct NvmlDeviceId {
  unsigned index = 0;
  std::string uuid;
};

// Note [NVML device order]. `visible`: CUDA_VISIBLE_DEVICES' value (null: unset). An error
// names an entry that is neither (MIG instances: "MIG-...").
StatusOr<NvmlDeviceId> nvml_index_of(int cuda_index, const char* visible);

class Nvml {
 public:
  // Loads `library` (a path or a name dlopen searches) and calls nvmlInit_v2. The error says
  // why not (dlopen's message, a missing entry point, NVML's own error string).
  static StatusOr<std::unique_ptr<Nvml>> open(const std::string& library = kNvmlLibrary);
  ~Nvml();  // nvmlShutdown, dlclose
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  StatusOr<GpuSample> sample(const NvmlDeviceId& device) const;

 private:
  struct Api;
  explicit Nvml(std::unique_ptr<Api> api);
  std::unique_ptr<Api> api_;
};

// Sets trident_gpu_utilization_ratio, trident_gpu_memory_used_bytes,
// trident_gpu_memory_total_bytes and trident_gpu_power_watts, labelled gpu=<CUDA index>.
void publish_gpu_sample(Registry& registry, int cuda_index, const GpuSample& s);

// What the run monitor holds on a CUDA rank: NVML and its device, sampled with the other
// machine figures (monitor.system_interval).
class GpuMetrics {
 public:
  // `library`: TRIDENT_NVML_LIBRARY when set, else kNvmlLibrary. Null, after one line on
  // stderr that names `who` and says why, when NVML cannot be used: no GPU metrics then,
  // and the run goes on.
  static std::unique_ptr<GpuMetrics> open(int cuda_index, const std::string& who);
  // Samples and publishes; after a failure, one line on stderr and no more samples.
  void publish(Registry& registry);

 private:
  GpuMetrics(std::unique_ptr<Nvml> nvml, NvmlDeviceId device, int cuda_index, std::string who)
      : nvml_(std::move(nvml)),
        device_(std::move(device)),
        cuda_index_(cuda_index),
        who_(std::move(who)) {}
  std::unique_ptr<Nvml> nvml_;
  NvmlDeviceId device_;
  int cuda_index_;
  std::string who_;
};

}  // namespace trident::monitor
