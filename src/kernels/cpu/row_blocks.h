// How the normalization kernels (layernorm, rmsnorm) split N rows of C elements into parallel
// work: row_grain for loops over independent rows, and fixed row blocks for the sums over
// rows (parameter gradients), whose bits must not depend on the thread count.
// Internal to kernels/cpu.
// Not here: reductions along a row (kernels/cpu/row_reduce.h).
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/parallel.h"

namespace trident::kernels::cpu {

// Rows per parallel chunk: enough elements that a chunk outweighs its scheduling.
inline int64_t row_grain(int64_t C) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(C, 1));
}

// Note [Deterministic parameter gradients]
// dweight and dbias are sums over all N rows. The rows are cut into blocks whose size depends
// only on N (at least kMinBlockRows rows, at most kMaxBlocks blocks). One thread handles a
// whole block: it computes dx for the block's rows and adds their contributions, in row
// order, to the block's own slot of a scratch buffer. The slots are then added in block
// order (sum_blocks). No atomics and no per-thread buffers, so the bits do not depend on the
// thread count, and the scratch is at most kMaxBlocks x C doubles per gradient.
inline constexpr int64_t kMinBlockRows = 8;
inline constexpr int64_t kMaxBlocks = 64;

struct RowBlocks {
  int64_t rows;   // rows per block (the last block may have fewer)
  int64_t count;  // number of blocks
};

// The blocks of N >= 1 rows.
inline RowBlocks row_blocks(int64_t N) {
  const int64_t rows = std::max(kMinBlockRows, (N + kMaxBlocks - 1) / kMaxBlocks);
  return {rows, (N + rows - 1) / rows};
}

// grad (C) = the per-block partials (blocks x C, block-major) added in block order, rounded
// once to T. The sums are formed in place in the first block's row of partial.
template <class T>
void sum_blocks(T* grad, double* partial, int64_t blocks, int64_t C) {
  parallel_for(0, C, 4096, [&](int64_t cb, int64_t ce) {
    for (int64_t b = 1; b < blocks; ++b) {
      const double* p = partial + b * C;
      for (int64_t j = cb; j < ce; ++j) partial[j] += p[j];
    }
    for (int64_t j = cb; j < ce; ++j) grad[j] = static_cast<T>(partial[j]);
  });
}

}  // namespace trident::kernels::cpu
