// Tensor parallelism, Megatron-LM's layout (Shoeybi et al., 2019), applied from outside to a
// model built for one device: one applier carries out any family's plan (its parallel_plan(),
// data over module paths: nn/parallel_plan.h). For each layer its plan names, the applier
// replaces each parameter's data by this rank's shard and gives the layer the style that
// computes with the shards (nn/parallel_style.h):
//
//   columnwise      Conv1D: this rank's output columns (of each of the `fused` matrices: for
//                   GPT-2's c_attn its slice of q, k and v, hence its heads). The input enters
//                   through copy_to_tp (its gradient is all-reduced).
//   rowwise         Conv1D: this rank's input rows; the partial products are all-reduced
//                   (reduce_from_tp), then the (replicated) bias added.
//   vocab-parallel  Embedding: rows [begin, end) of the vocabulary (uneven by one row when V
//   embedding       does not divide). Lookups of other ids give zeros and the ranks' rows are
//                   all-reduced; as the tied LM head it computes this rank's logit columns and a
//                   vocab-parallel cross-entropy, so no rank ever holds the full (N, V) logits.
//   sequence-       LayerNorm, Embedding (learned positions): replicated; under sequence
//   parallel        parallelism they work on this rank's part of the sequence.
// Layers the plan does not name are replicated: every rank computes them, and their
// gradients, identically. Per layer and micro-batch: 2 all-reduces in the forward (after each
// row-parallel layer) and 2 in the backward (before each column-parallel layer's input):
// tp_collectives.h. Sequence parallelism turns each into a reduce-scatter / all-gather pair
// along the sequence, and all-reduces the gradients of the layer norms and row-parallel biases,
// which every rank then computes from its part of the sequence only.
#pragma once

#include <map>
#include <memory>
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

class TensorParallelPlan {
 public:
  // Shards `model` over `tp` by its parallel_plan() (throws naming the sizes when they do not
  // divide: the family's check_tensor_parallel, and the vocabulary by tp; and naming the entry
  // when a plan entry matches no layer or a layer of a type its style cannot split). The
  // model must outlive nothing: the styles keep `tp` by reference. With `sequence_parallel`,
  // the activations between the column/row pairs (layer norms, residuals, embeddings) are
  // split along the sequence too (tp_collectives.h).
  static std::unique_ptr<TensorParallelPlan> apply(models::CausalLM& model, comm::Communicator& tp,
                                                   bool sequence_parallel = false);

  int size() const { return size_; }
  int rank() const { return rank_; }
  // Whether parameter `name` is split (else it is replicated on every tensor-parallel rank).
  bool is_split(const std::string& name) const { return splits_.contains(name); }
  // The single-device shape of parameter `name`.
  const Shape& full_shape(const std::string& name) const { return full_shapes_.at(name); }
  // This rank's shard of a full-size tensor of parameter `name` (its value or optimizer state).
  Tensor local_from_full(const std::string& name, const Tensor& full) const;
  // Where this rank's shard `local` of parameter `name` sits in the full tensor: one box
  // (offsets in the full tensor, and the part of `local` there) per block.
  struct Box {
    std::vector<int64_t> offsets;
    Tensor part;
  };
  std::vector<Box> boxes(const std::string& name, const Tensor& local) const;
  // The same boxes for rank `r`, without values: offsets and the stored shapes (for the rank
  // that writes the manifest).
  std::vector<std::pair<std::vector<int64_t>, Shape>> box_shapes(const std::string& name, int r) const;

 private:
  // [begin, begin + length) of a block of `extent` elements held by rank `r`.
  std::pair<int64_t, int64_t> range(int64_t extent, int r) const;

  int size_ = 1, rank_ = 0;
  std::map<std::string, TensorSplit> splits_;
  std::map<std::string, Shape> full_shapes_;
};

// Global-norm clipping of a model split across ranks: the squares of parameters that `plan`
// splits are summed over `tp` (replicated ones counted once), and everything over the
// pipeline stages `pp` (each holds other parameters). plan/tp and pp may be null. Returns
// the norm before clipping.
double clip_grad_norm_model_parallel(const std::vector<nn::NamedTensor>& params, const TensorParallelPlan* plan,
                                     comm::Communicator* tp, comm::Communicator* pp, double max_norm);

}  // namespace trident::parallel
