// What ZeRO-Infinity's two NVMe tiers share: the optimizer state's (zero/state_store.h) and
// ZeRO-3's parameters' (zero/parameter_store.h). Each keeps one scratch file per rank under
// parallel.nvme_path and moves its regions through staging buffers in host memory: the file's
// name and options, and the buffers (aligned for O_DIRECT, from the caching allocator so that
// the memory categories count them), are made here.
//
// Not here: what the regions hold or when they move (the tiers), the file's I/O
// (offload/nvme_file.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "core/allocator.h"
#include "core/tensor.h"
#include "offload/nvme_file.h"

namespace trident::parallel::zero {

// A flat host tensor of `dtype` covering `bytes` rounded up to offload::kNvmeAlignment, whose
// first element is aligned for O_DIRECT; allocated under `category`, not initialized.
Tensor aligned_staging(MemoryCategory category, int64_t bytes, DType dtype);

// Creates this rank's scratch file of `bytes` bytes in `dir`, named
// trident-<host>-<pid>-<n>.<kind> (the name is for messages: the file is unlinked once open),
// with `queue_depth` requests in flight; errors name parallel.nvme_path.
std::unique_ptr<offload::NvmeFile> create_tier_file(const std::filesystem::path& dir, const std::string& kind,
                                                    int64_t bytes, int queue_depth);

}  // namespace trident::parallel::zero
