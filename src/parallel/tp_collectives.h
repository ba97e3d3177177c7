// The differentiable collectives of tensor parallelism (Megatron-LM's mappings, Shoeybi et
// al., "Megatron-LM", 2019, section 3), each a conjugate pair of forward and backward:
//
//   copy_to_tp(x)       forward identity,      backward all-reduce   ("f": where a replicated
//                       activation enters a column-parallel layer; each rank's gradient is
//                       only its shard's part)
//   reduce_from_tp(x)   forward all-reduce,    backward identity     ("g": where the partial
//                       sums of a row-parallel layer leave it)
//   gather_from_tp(x)   forward all-gather along the last dim (uneven widths allowed),
//                       backward this rank's slice (full logits for inference)
// and those of sequence parallelism (Korthikanti et al., "Reducing Activation Recomputation
// in Large Transformer Models", 2022), on (B, T, ...) activations split along T:
//   gather_sequence(x)          forward all-gather along dim 1, backward reduce-scatter
//                               (entering a column-parallel layer: replaces copy_to_tp)
//   reduce_scatter_sequence(x)  forward reduce-scatter along dim 1, backward all-gather
//                               (leaving a row-parallel layer: replaces reduce_from_tp)
//   gather_whole_sequence(x)    forward all-gather along dim 1, backward this rank's block
//   split_sequence(x)           forward this rank's block of dim 1, backward all-gather
//                               (the pair around a layer every rank runs whole on the
//                               whole sequence: each rank's gradient is then the whole
//                               one, not a part to be summed; Megatron's
//                               gather_from_sequence_parallel_region without reduction, and
//                               scatter_to_sequence_parallel_region)
//
// vocab_parallel_cross_entropy: the mean cross-entropy of logits whose vocabulary is split
// across the ranks, (N, V_r) on rank r holding ids [vocab_begin, vocab_begin + V_r), without
// gathering them: the row maxima, the sums of exponentials and the target logits are
// all-reduced (three (N)-sized reductions), and the backward is softmax - onehot on each
// rank's own columns. Targets equal to -1 are ignored.
//
// Every rank of `comm` must call these in the same order (they are collectives).
#pragma once

#include <vector>

#include "comm/communicator.h"
#include "core/tensor.h"

namespace trident::parallel {

Tensor copy_to_tp(const Tensor& x, comm::Communicator& comm);
Tensor reduce_from_tp(const Tensor& x, comm::Communicator& comm);
// widths[r]: rank r's size of x's last dim.
Tensor gather_from_tp(const Tensor& x, comm::Communicator& comm, const std::vector<int64_t>& widths);
Tensor gather_sequence(const Tensor& x, comm::Communicator& comm);
Tensor reduce_scatter_sequence(const Tensor& x, comm::Communicator& comm);
Tensor gather_whole_sequence(const Tensor& x, comm::Communicator& comm);
Tensor split_sequence(const Tensor& x, comm::Communicator& comm);
Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets, int64_t vocab_begin,
                                    comm::Communicator& comm);

}  // namespace trident::parallel
