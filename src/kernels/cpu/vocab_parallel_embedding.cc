#include "kernels/cpu/vocab_parallel_embedding.h"

namespace trident::kernels::cpu {

void vocab_parallel_local_ids(int64_t* local, float* mask, const int64_t* ids, int64_t n, int64_t begin,
                              int64_t rows) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = ids[i] - begin;
    const bool mine = id >= 0 && id < rows;
    local[i] = mine ? id : 0;
    mask[i] = mine ? 1.0f : 0.0f;
  }
}

}  // namespace trident::kernels::cpu
