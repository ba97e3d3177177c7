// The tensor-parallel styles of the layers trident has (Conv1D, Linear, Embedding, LayerNorm,
// RMSNorm): how each computes with this rank's shards, as wrappers of the parallelism kind
// (nn/wrapper.h) that the applier installs (tensor_parallel.h): Megatron-LM's column- and
// row-parallel layers, the column-parallel layer kept whole for fewer kv heads than ranks, the
// vocabulary-parallel embedding and head, and sequence parallelism's norms and positions.
// They register by name and layer type in tp_style_registry.h (register_tp_styles); a style
// of another layer type registers where it is written. `sp`: sequence parallelism
// (activations between the column/row pairs split along the sequence).
#pragma once

#include <cstdint>
#include <memory>

#include "comm/communicator.h"
#include "nn/module.h"
#include "core/tensor.h"

namespace trident::parallel {

class TpStyleRegistry;

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
  bool sequence_parallel() const { return sp_; }

 private:
  comm::Communicator& tp_;
  bool sp_;
  mutable std::weak_ptr<TensorImpl> last_in_, last_out_;
  mutable uint64_t last_version_ = 0;
  mutable bool last_recorded_ = false;
};

// Registers the styles of nn's layers (nn/parallel_plan.h's tp_style names):
//   columnwise             Conv1D, Linear  output features split (`fused` blocks); input
//                                          through the TpEntry
//   rowwise                Conv1D, Linear  input features split; partial products summed,
//                                          then the (replicated) bias added
//   columnwise_replicated  Linear          whole on every rank; this rank's `heads` share
//   vocab_parallel         Embedding, Linear  vocabulary rows split
//   sequence_parallel      LayerNorm, RMSNorm, Embedding (positions)  this rank's part of the
//                                          sequence (nothing without sequence parallelism)
// Column- and row-wise layers take adapters (nn/linear.h, Note [Adapter factors]): the factor
// on the split side is split alike (column-wise: the output factor's rows, in the entry's fused
// blocks; row-wise: the input factor's columns), the other stays whole (replicate_factor).
// Called once, by tp_style_registry() (Note [Registering styles]).
void register_tp_styles(TpStyleRegistry& registry);

// An adapter's factor that every tensor-parallel rank holds whole while each computes with its
// own part of the rest (LoRA's A on a column-parallel layer, B on a row-parallel one): each
// rank's gradient of it is a partial sum, so its weight enters through copy_to_tp (the ranks'
// gradients summed in the backward).
void replicate_factor(nn::Module& factor, comm::Communicator& tp);

}  // namespace trident::parallel
