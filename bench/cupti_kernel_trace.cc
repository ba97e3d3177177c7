// libtrident_kernel_trace.so: a CUDA injection library (CUDA_INJECTION64_PATH) that records
// every kernel's start and end with CUPTI's activity API (the timestamps torch.profiler reads,
// no hardware counters, no per-kernel serialization) and, at exit, writes those that ran
// inside the program's cudaProfilerStart/Stop range (train_step_bench --profiler-range) to
// $TRIDENT_KERNEL_TRACE_OUT, one kernel a line: start_ns <TAB> end_ns <TAB> demangled name.
// bench/gpu_kernel_profile.py uses it beside Nsight Compute: it works where ncu cannot read
// the counters (ERR_NVGPUCTRPERM), and its timeline shows the GPU's idle gaps inside a step,
// which ncu's serialized replay cannot.
//
//   CUDA_INJECTION64_PATH=libtrident_kernel_trace.so TRIDENT_KERNEL_TRACE_OUT=k.tsv \
//     train_step_bench ... --device cuda --profiler-range
#include <cupti.h>
#include <cxxabi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Kernel {
  uint64_t start, end;
  std::string name;
};

std::mutex g_mutex;
std::vector<Kernel> g_kernels;
uint64_t g_range_start = 0, g_range_stop = 0;  // 0: not seen (stop 0 = to the end)
CUpti_SubscriberHandle g_subscriber = nullptr;
constexpr size_t kBufferBytes = size_t{8} << 20;

void report(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  std::fprintf(stderr, "trident_kernel_trace: %s: %s\n", what, msg != nullptr ? msg : "?");
}

// CUPTI records the mangled name; the trace holds it demangled, as Nsight Compute and
// torch.profiler show kernels.
std::string demangled(const char* name) {
  if (name == nullptr) return "?";
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string result = status == 0 && out != nullptr ? out : name;
  std::free(out);
  return result;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  std::lock_guard<std::mutex> lock(g_mutex);
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    g_kernels.push_back({k->start, k->end, demangled(k->name)});
  }
  std::free(buffer);
}

// The range's ends: after cudaProfilerStart returns, when cudaProfilerStop is entered (the
// benchmark synchronizes the device before both, so no kernel straddles them).
void CUPTIAPI on_api(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API) return;
  const auto* info = static_cast<const CUpti_CallbackData*>(data);
  uint64_t now = 0;
  cuptiGetTimestamp(&now);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (id == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000 && info->callbackSite == CUPTI_API_EXIT &&
      g_range_start == 0)
    g_range_start = now;
  if (id == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000 && info->callbackSite == CUPTI_API_ENTER)
    g_range_stop = now;
}

void write_trace() {
  report(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  const char* path = std::getenv("TRIDENT_KERNEL_TRACE_OUT");
  FILE* f = path != nullptr ? std::fopen(path, "w") : stderr;
  if (f == nullptr) {
    std::fprintf(stderr, "trident_kernel_trace: cannot write %s\n", path);
    return;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(f, "# range\t%llu\t%llu\n", static_cast<unsigned long long>(g_range_start),
               static_cast<unsigned long long>(g_range_stop));
  for (const Kernel& k : g_kernels) {
    if (k.start < g_range_start || (g_range_stop != 0 && k.end > g_range_stop)) continue;
    std::fprintf(f, "%llu\t%llu\t%s\n", static_cast<unsigned long long>(k.start),
                 static_cast<unsigned long long>(k.end), k.name.c_str());
  }
  if (f != stderr) std::fclose(f);
}

}  // namespace

// Called by the CUDA driver when it initializes (CUDA_INJECTION64_PATH); nonzero: success.
extern "C" int InitializeInjection() {
  report(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
  report(cuptiSubscribe(&g_subscriber, on_api, nullptr), "cuptiSubscribe");
  report(cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                             CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000),
         "cuptiEnableCallback(cudaProfilerStart)");
  report(cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                             CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000),
         "cuptiEnableCallback(cudaProfilerStop)");
  report(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityEnable(CONCURRENT_KERNEL)");
  std::atexit(write_trace);
  return 1;
}
