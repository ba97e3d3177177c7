#include "parallel/zero/nvme_staging.h"

#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "core/factory.h"
#include "parallel/zero/layout.h"

namespace trident::parallel::zero {

Tensor aligned_staging(MemoryCategory category, int64_t bytes, DType dtype) {
  const auto size = static_cast<int64_t>(element_size(dtype));
  const int64_t n = offload::nvme_aligned(bytes) / size, slack = offload::kNvmeAlignment / size;
  const Tensor raw = empty({n + slack}, dtype, Device::cpu(), category);
  const auto addr = reinterpret_cast<uintptr_t>(raw.raw_data());
  const auto pad = static_cast<int64_t>((offload::kNvmeAlignment - addr % offload::kNvmeAlignment) %
                                        offload::kNvmeAlignment) / size;
  return flat_slice(raw, pad, n);
}

std::unique_ptr<offload::NvmeFile> create_tier_file(const std::filesystem::path& dir, const std::string& kind,
                                                    int64_t bytes, int queue_depth) {
  static std::atomic<int> files{0};  // several tiers (and ZeRO groups) per process
  char host[256] = "host";
  ::gethostname(host, sizeof host - 1);
  const std::string name = "trident-" + std::string(host) + "-" + std::to_string(::getpid()) + "-" +
                           std::to_string(files++) + "." + kind;
  offload::NvmeFileOptions options;
  options.queue_depth = queue_depth;
  return offload::NvmeFile::create(dir / name, bytes, options, "parallel.nvme_path");
}

}  // namespace trident::parallel::zero
