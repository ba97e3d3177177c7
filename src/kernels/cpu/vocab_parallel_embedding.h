// The local ids of a vocabulary-parallel embedding (Megatron-LM's VocabParallelEmbedding):
// this tensor-parallel rank holds rows [begin, begin + rows) of the table. Token i looks up
// local row ids[i] - begin when that is one of them (mask 1), else row 0 (mask 0: its result
// is zeroed, and another rank supplies it); the ranks' masked lookups sum to the full one.
#pragma once

#include <cstdint>

namespace trident::kernels::cpu {

void vocab_parallel_local_ids(int64_t* local, float* mask, const int64_t* ids, int64_t n, int64_t begin,
                              int64_t rows);

}  // namespace trident::kernels::cpu
