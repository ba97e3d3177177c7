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
#include "core/tensor.h"
#include "nn/parallel_style.h"

namespace trident::parallel {

// Note [One entry per input]
// A column-parallel layer's input enters the tensor-parallel region: gathered along the
// sequence (sequence parallelism) or marked so that the backward all-reduces its gradient.
// Several column-parallel layers often read the same input: LLaMA's q, k and v projections,
// its gate and up. Megatron fuses each group into one layer, so its input enters once. Here
// they are separate layers, and they share one TpEntry: the same input tensor (same impl,
// same version, same grad mode) entering again gets the same result. The forward then gathers
// once, not three times (and twice for the MLP), and keeps one gathered copy. The backward sums
// the layers' gradients before a single reduce-scatter or all-reduce. The entry holds weak
// references only, so it keeps no tensor alive.
class TpEntry {
 public:
  TpEntry(comm::Communicator& tp, bool sp) : tp_(tp), sp_(sp) {}
  Tensor enter(const Tensor& x) const;
  comm::Communicator& tp() const { return tp_; }

 private:
  comm::Communicator& tp_;
  bool sp_;
  mutable std::weak_ptr<TensorImpl> last_in_, last_out_;
  mutable uint64_t last_version_ = 0;
  mutable bool last_recorded_ = false;
};

// Conv1D (weight (in, out)): this rank's output columns / input rows. Column-parallel layers
// enter their input through `entry`, one per model and tensor-parallel group.
std::shared_ptr<const nn::Conv1DStyle> conv1d_columnwise(std::shared_ptr<const TpEntry> entry);
std::shared_ptr<const nn::Conv1DStyle> conv1d_rowwise(comm::Communicator& tp, bool sp);
// Linear (weight (out, in)): this rank's output rows / input columns.
std::shared_ptr<const nn::LinearStyle> linear_columnwise(std::shared_ptr<const TpEntry> entry);
std::shared_ptr<const nn::LinearStyle> linear_rowwise(comm::Communicator& tp, bool sp);
// Linear kept whole on every rank, of which this rank uses output features [begin, begin +
// width) (grouped-query attention's k and v when there are fewer kv heads than ranks); the
// weight's gradient is summed over the ranks.
std::shared_ptr<const nn::LinearStyle> linear_columnwise_replicated(std::shared_ptr<const TpEntry> entry,
                                                                    int64_t begin, int64_t width);
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
