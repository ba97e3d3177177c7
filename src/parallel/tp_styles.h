// The parallel styles (nn/parallel_style.h) the tensor-parallel applier gives the layers it
// splits (tensor_parallel.h): how each computes with this rank's shards, Megatron-LM's column-
// and row-parallel layers, the vocabulary-parallel embedding and head, and sequence
// parallelism's norms and positions. `sp`: sequence parallelism (activations between the
// column/row pairs split along the sequence).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "nn/parallel_style.h"

namespace trident::parallel {

// Conv1D (weight (in, out)): this rank's output columns / input rows.
std::shared_ptr<const nn::Conv1DStyle> conv1d_columnwise(comm::Communicator& tp, bool sp);
std::shared_ptr<const nn::Conv1DStyle> conv1d_rowwise(comm::Communicator& tp, bool sp);
// Linear (weight (out, in)): this rank's output rows / input columns.
std::shared_ptr<const nn::LinearStyle> linear_columnwise(comm::Communicator& tp, bool sp);
std::shared_ptr<const nn::LinearStyle> linear_rowwise(comm::Communicator& tp, bool sp);
// Linear kept whole on every rank, of which this rank uses output features [begin, begin +
// width) (grouped-query attention's k and v when there are fewer kv heads than ranks); the
// weight's gradient is summed over the ranks.
std::shared_ptr<const nn::LinearStyle> linear_columnwise_replicated(comm::Communicator& tp, bool sp, int64_t begin,
                                                                    int64_t width);
// Vocabulary split by rows [begin, begin + widths[rank]): the embedding (and, tied, its head)
// and an untied Linear head.
std::shared_ptr<const nn::EmbeddingStyle> vocab_parallel_embedding(comm::Communicator& tp, bool sp, int64_t begin,
                                                                   std::vector<int64_t> widths);
std::shared_ptr<const nn::LinearStyle> vocab_parallel_head(comm::Communicator& tp, bool sp, int64_t begin,
                                                           std::vector<int64_t> widths);
// Sequence parallelism: learned positions and norms on this rank's part of the sequence.
std::shared_ptr<const nn::EmbeddingStyle> sequence_split_positions(comm::Communicator& tp);
std::shared_ptr<const nn::LayerNormStyle> sequence_split_layernorm(comm::Communicator& tp);
std::shared_ptr<const nn::RMSNormStyle> sequence_split_rmsnorm(comm::Communicator& tp);

}  // namespace trident::parallel
