#include "monitor/nvml.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>

namespace trident::monitor {
namespace {

// NVML's C ABI (nvml.h): return codes are an enum (0 = NVML_SUCCESS), a device is an opaque
// pointer, and these structs are laid out as below.
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
struct nvmlUtilization_t {
  unsigned int gpu, memory;  // percent of the last sample period
};
struct nvmlMemory_t {
  unsigned long long total, free, used;  // bytes
};

}  // namespace

struct Nvml::Api {
  void* handle = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*by_index)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*by_uuid)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned int*) = nullptr;  // milliwatts
  std::string library;

  std::string error(const char* call, nvmlReturn_t rc) const {
    const char* what = error_string != nullptr ? error_string(rc) : nullptr;
    return library + ": " + call +
           " failed: " + (what != nullptr ? what : "error " + std::to_string(rc));
  }
};

StatusOr<NvmlDeviceId> nvml_index_of(int cuda_index, const char* visible) {
  NvmlDeviceId id;
  if (visible == nullptr) {
    id.index = static_cast<unsigned>(cuda_index);
    return id;
  }
  const std::string all = visible;
  size_t at = 0;
  for (int i = 0; i < cuda_index; ++i) {
    at = all.find(',', at);
    if (at == std::string::npos) break;
    ++at;
  }
  const std::string entry = at == std::string::npos ? "" : all.substr(at, all.find(',', at) - at);
  if (entry.rfind("GPU-", 0) == 0) {
    id.uuid = entry;
    return id;
  }
  if (!entry.empty() && entry.find_first_not_of("0123456789") == std::string::npos &&
      entry.size() < 9) {
    id.index = static_cast<unsigned>(std::stoul(entry));
    return id;
  }
  return Status::invalid("CUDA device " + std::to_string(cuda_index) +
                         " has no NVML index: CUDA_VISIBLE_DEVICES = \"" + all +
                         "\" gives entry \"" + entry + "\" (allowed: indices or GPU-... UUIDs)");
}

Nvml::Nvml(std::unique_ptr<Api> api) : api_(std::move(api)) {}

Nvml::~Nvml() {
  if (api_->shutdown != nullptr) api_->shutdown();
  dlclose(api_->handle);
}

StatusOr<std::unique_ptr<Nvml>> Nvml::open(const std::string& library) {
  auto api = std::make_unique<Api>();
  api->library = library;
  api->handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (api->handle == nullptr) {
    const char* why = dlerror();
    return Status::error(ErrorKind::kNotImplemented,
                         "NVML not loaded: " + std::string(why != nullptr ? why : library));
  }
  std::string missing;
  auto bind = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(api->handle, name));
    if (fn == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(name);
  };
  bind(api->init, "nvmlInit_v2");
  bind(api->shutdown, "nvmlShutdown");
  bind(api->error_string, "nvmlErrorString");
  bind(api->by_index, "nvmlDeviceGetHandleByIndex_v2");
  bind(api->by_uuid, "nvmlDeviceGetHandleByUUID");
  bind(api->utilization, "nvmlDeviceGetUtilizationRates");
  bind(api->memory, "nvmlDeviceGetMemoryInfo");
  bind(api->power, "nvmlDeviceGetPowerUsage");
  if (!missing.empty()) {
    dlclose(api->handle);
    return Status::error(ErrorKind::kNotImplemented,
                         "NVML not usable: " + library + " lacks " + missing);
  }
  if (const nvmlReturn_t rc = api->init(); rc != 0) {
    const std::string why = api->error("nvmlInit_v2", rc);
    dlclose(api->handle);
    return Status::io_error("NVML not usable: " + why);
  }
  return std::unique_ptr<Nvml>(new Nvml(std::move(api)));
}

StatusOr<GpuSample> Nvml::sample(const NvmlDeviceId& device) const {
  nvmlDevice_t d = nullptr;
  if (const nvmlReturn_t rc = device.uuid.empty() ? api_->by_index(device.index, &d)
                                                  : api_->by_uuid(device.uuid.c_str(), &d);
      rc != 0)
    return Status::io_error(api_->error(device.uuid.empty() ? "nvmlDeviceGetHandleByIndex_v2"
                                                            : "nvmlDeviceGetHandleByUUID",
                                        rc) +
                            " for GPU " +
                            (device.uuid.empty() ? std::to_string(device.index) : device.uuid));
  GpuSample s;
  nvmlUtilization_t u{};
  if (const nvmlReturn_t rc = api_->utilization(d, &u); rc != 0)
    return Status::io_error(api_->error("nvmlDeviceGetUtilizationRates", rc));
  s.utilization_ratio = u.gpu / 100.0;
  nvmlMemory_t m{};
  if (const nvmlReturn_t rc = api_->memory(d, &m); rc != 0)
    return Status::io_error(api_->error("nvmlDeviceGetMemoryInfo", rc));
  s.memory_used_bytes = static_cast<int64_t>(m.used);
  s.memory_total_bytes = static_cast<int64_t>(m.total);
  unsigned int milliwatts = 0;
  if (api_->power(d, &milliwatts) == 0)
    s.power_watts = milliwatts / 1000.0;  // NOT_SUPPORTED on some GPUs
  return s;
}

void publish_gpu_sample(Registry& registry, int cuda_index, const GpuSample& s) {
  const Labels gpu = {{"gpu", std::to_string(cuda_index)}};
  registry
      .gauge("trident_gpu_utilization_ratio",
             "fraction of the last NVML sample period the GPU was busy", gpu)
      .set(s.utilization_ratio);
  registry.gauge("trident_gpu_memory_used_bytes", "GPU memory in use, all processes (NVML)", gpu)
      .set(static_cast<double>(s.memory_used_bytes));
  registry.gauge("trident_gpu_memory_total_bytes", "GPU memory in all (NVML)", gpu)
      .set(static_cast<double>(s.memory_total_bytes));
  if (s.power_watts)
    registry.gauge("trident_gpu_power_watts", "GPU power draw (NVML)", gpu).set(*s.power_watts);
}

std::unique_ptr<GpuMetrics> GpuMetrics::open(int cuda_index, const std::string& who) {
  const char* override_library = std::getenv("TRIDENT_NVML_LIBRARY");
  const std::string library =
      override_library != nullptr && *override_library != '\0' ? override_library : kNvmlLibrary;
  auto id = nvml_index_of(cuda_index, std::getenv("CUDA_VISIBLE_DEVICES"));
  if (!id.is_ok()) {
    std::fprintf(stderr, "%s: no GPU metrics: %s\n", who.c_str(), id.status().message().c_str());
    return nullptr;
  }
  auto nvml = Nvml::open(library);
  if (!nvml.is_ok()) {
    std::fprintf(stderr, "%s: no GPU metrics: %s\n", who.c_str(), nvml.status().message().c_str());
    return nullptr;
  }
  return std::unique_ptr<GpuMetrics>(
      new GpuMetrics(std::move(nvml.value()), id.value(), cuda_index, who));
}

void GpuMetrics::publish(Registry& registry) {
  if (nvml_ == nullptr) return;
  auto s = nvml_->sample(device_);
  if (!s.is_ok()) {
    std::fprintf(stderr, "%s: no more GPU metrics: %s\n", who_.c_str(),
                 s.status().message().c_str());
    nvml_.reset();
    return;
  }
  publish_gpu_sample(registry, cuda_index_, s.value());
}

}  // namespace trident::monitor
