// An emulated accelerator for tests: DeviceType::kPrivateUse backed by host memory and the
// host's kernels, registered through the same tables a GPU backend fills (core's allocator
// and DeviceOps, kernels::DeviceKernels). It runs every device code path (the op front ends'
// device branches, copies between "devices", Module::to, optimizers' state placement,
// ZeRO-Offload's masters) on machines without a GPU, and since its kernels are the host's,
// a result on it must equal the host's.
#pragma once

#include <cstdint>

#include "core/device.h"

namespace trident::testing {

// Registers the emulated device (once; later calls do nothing) and returns it.
Device emulated_device();

// The limit its memory reports (MemorySource::limit; not enforced), as a GPU reports its
// size or TRIDENT_CUDA_MEMORY_LIMIT_MB: 0 (none) by default.
void set_emulated_memory_limit(int64_t bytes);

// The logits row padding the emulated device asks for (DeviceKernels::logits_row_multiple).
// 1 by default: the host's layout, since oneDNN picks bf16 GEMM kernels by stride and a padded
// layout could change the bits. The op suite sets the GPU's 8 to cover the padded path.
void set_emulated_logits_row_multiple(int64_t multiple);

}  // namespace trident::testing
