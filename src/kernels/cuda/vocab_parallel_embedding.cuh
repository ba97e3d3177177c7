// The local ids of a vocabulary-parallel embedding on the GPU: the contract of
// kernels/cpu/vocab_parallel_embedding.h, so the ids never leave the device.
#pragma once

#include <cstdint>

namespace trident::cuda {

void launch_vocab_parallel_local_ids(int64_t* local, float* mask, const int64_t* ids, int64_t n, int64_t begin,
                                     int64_t rows);

}  // namespace trident::cuda
