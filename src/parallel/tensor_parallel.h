// Tensor parallelism, Megatron-LM's layout (Shoeybi et al., 2019), applied from outside to a
// model built for one device: one applier carries out any family's plan (its parallel_plan(),
// data over module paths: nn/parallel_plan.h). For each layer its plan names, the applier looks
// the entry's style up by (style, layer type) in tp_style_registry.h, records the parameters
// the style splits, lets the style install its wrapper on the layer (nn/wrapper.h, outermost:
// adapters added later run inside it), and replaces each split parameter's data by this rank's
// shard. The styles of nn's layers (tp_styles.h):
//
//   columnwise      Conv1D, Linear: this rank's output features (of each of the `fused`
//                   matrices: for GPT-2's c_attn its slice of q, k and v, hence its heads). The
//                   input enters through copy_to_tp (its gradient is all-reduced).
//   rowwise         Conv1D, Linear: this rank's input features; the partial products are
//                   all-reduced (reduce_from_tp), then the (replicated) bias added.
//   vocab_parallel  Embedding, Linear head: rows [begin, end) of the vocabulary (uneven by one
//                   row when V does not divide). Lookups of other ids give zeros and the ranks'
//                   rows are all-reduced; as the LM head it computes this rank's logit columns
//                   and a vocab-parallel cross-entropy, so no rank ever holds the full (N, V)
//                   logits.
//   sequence_       LayerNorm, RMSNorm, Embedding (learned positions): replicated; under
//   parallel        sequence parallelism they work on this rank's part of the sequence.
//   (and columnwise_replicated: tp_styles.h)
// Layers the plan does not name are replicated: every rank computes them, and their
// gradients, identically. Per layer and micro-batch: 2 all-reduces in the forward (after each
// row-parallel layer) and 2 in the backward (before each column-parallel layer's input):
// tp_collectives.h. Sequence parallelism turns each into a reduce-scatter / all-gather pair
// along the sequence, and all-reduces the gradients of the layer norms and row-parallel biases,
// which every rank then computes from its part of the sequence only.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "models/causal_lm.h"

namespace trident::parallel {

// How one parameter is split across the tensor-parallel ranks: along `dim`, which holds
// `blocks` equal blocks (3 for c_attn's q, k, v), each block divided into tp contiguous
// ranges (the first ones one longer when it does not divide); rank r holds range r of every
// block.
struct TensorSplit {
  int64_t dim = 0;
  int64_t blocks = 1;
};

struct TpStyle;  // tp_style_registry.h

class TensorParallelPlan {
 public:
  // Shards `model` over `tp` by its parallel_plan() (throws naming the sizes when they do not
  // divide: the family's check_tensor_parallel, and the vocabulary by tp; and naming the entry
  // when a plan entry matches no layer, or a layer of a type for which its style is not
  // registered: the layer's path and type, and the styles that type has). The
  // model must outlive nothing: the styles keep `tp` by reference. With `sequence_parallel`,
  // the activations between the column/row pairs (layer norms, residuals, embeddings) are
  // split along the sequence too (tp_collectives.h).
  static std::unique_ptr<TensorParallelPlan> apply(models::CausalLM& model, comm::Communicator& tp,
                                                   bool sequence_parallel = false);

  int size() const { return size_; }
  int rank() const { return rank_; }
  // Whether parameter `name` is split (else it is replicated on every tensor-parallel rank).
  bool is_split(const std::string& name) const { return splits_.contains(name); }
  // How parameter `name` is split (nullopt: replicated).
  std::optional<TensorSplit> split_of(const std::string& name) const {
    const auto it = splits_.find(name);
    return it == splits_.end() ? std::nullopt : std::optional<TensorSplit>(it->second);
  }
  // This rank's shard of a full-size tensor of parameter `name` (its value or optimizer state).
  Tensor local_from_full(const std::string& name, const Tensor& full) const;

 private:
  void split_adapter_factors(nn::Module& layer, const std::string& path, const nn::ParallelPlanEntry& entry,
                             const TpStyle& style, comm::Communicator& tp,
                             const std::vector<std::pair<std::string, nn::Module*>>& modules);

  int size_ = 1, rank_ = 0;
  std::map<std::string, TensorSplit> splits_;
  std::map<std::string, Shape> full_shapes_;
};

}  // namespace trident::parallel
