// Front ends (no autograd, no communication) of vocabulary-parallel cross-entropy's local
// passes (kernels/cpu/vocab_parallel_cross_entropy.h): this tensor-parallel rank's logits
// (N, V) hold columns [begin, begin + V) of the vocabulary. parallel/tp_collectives combines
// the ranks' results. The logits are taken as f32, targets as i64; outputs are on the logits'
// device.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace trident::ops {

// (N) f32: each row's max over this rank's columns.
Tensor vocab_parallel_row_max(const Tensor& logits);
// (2, N) f64: each row's sum of exp(l - row_max), and its target's l - row_max when this rank
// holds the target's column (else 0). row_max: (N), the max over all ranks.
Tensor vocab_parallel_sums(const Tensor& logits, const Tensor& row_max, const Tensor& targets, int64_t begin);
// A vocabulary-parallel embedding's lookup (kernels/cpu/vocab_parallel_embedding.h), for this
// rank's rows [begin, begin + rows) of the table: the local row of each id (i64, row 0 for
// other ranks' ids) and its mask (f32, 1 for this rank's ids, shape ids + (1)), on the ids'
// device.
struct LocalIds {
  Tensor local, mask;
};
LocalIds vocab_parallel_local_ids(const Tensor& ids, int64_t begin, int64_t rows);
// (N, V) f32: (softmax over the whole vocabulary - onehot) * scale, 0 on rows whose target is
// ignore_index; sums: (2, N), summed over all ranks.
Tensor vocab_parallel_backward(const Tensor& logits, const Tensor& row_max, const Tensor& sums, const Tensor& targets,
                               int64_t begin, int64_t ignore_index, double scale);

}  // namespace trident::ops
