// Expert parallelism (Megatron-Core's MoEAlltoAllTokenDispatcher, DeepSpeed-MoE): the ranks
// along the mesh's ep axis hold other experts of every mixture-of-experts layer, and each
// layer's rows travel to the rank holding their expert and back with all_to_all_v over that
// axis. Applied from outside the model (moe/expert_dispatch.h is the seam): the layers keep
// their routing, losses and grouped products; this rank keeps only its experts' weights.
//
// Note [Expert-parallel dispatch]
// Per layer and forward: (1) the per-expert row counts go to every ep rank (one all_to_all of
// E integers: block d holds the counts of rank d's experts); (2) the rows, already sorted by
// expert, so that rank d's are one contiguous block, go out with all_to_all_v, and arrive
// grouped by source rank, then expert; (3) they are regrouped by local expert (a gather), run
// through the local experts' grouped products, put back in source order (the scatter that
// inverts the gather) and (4) returned with the reverse all_to_all_v. The backward runs the
// same exchanges in reverse: counts are never guessed, and every rank calls the collectives
// in the same order because every rank runs the same layers.
//
// Note [Expert gradients over expert parallelism]
// A dense parameter's gradient is averaged over dp x ep x cp (every rank's own tokens). An
// expert's weights see the tokens of all ep ranks on the one rank that holds them, so its
// gradient there is the sum of ep ranks' contributions, and averaging it over its own group
// (dp x cp) alone would leave it ep times the single-process gradient. The exchange
// therefore scales the gradient arriving at the experts by 1 / ep, and the gradient the rows
// carry back to their tokens by ep: the experts' weight gradients are the mean over all ranks
// (as Megatron's expert-parallel gradient scaling), the tokens' exactly what they were.
// For ep a power of two both scalings are exact.
//
// Note [Exchange cost per layer]
// Each layer has its own dispatch, which knows the layer's index and records, through the
// model's AuxOutputs, what its exchanges cost this rank: "moe_all_to_all_bytes", the bytes of
// the rows it sent to other ranks (its own block stays here; the counts' E integers are left
// out), and "moe_all_to_all_seconds", the wall time of its exchanges (counts and rows, a
// collective's wait for the slowest rank included), both over the forward's two exchanges
// and the backward's two. A checkpointed region's rerun exchanges the rows again, and that
// is counted (AuxOutputs::add_layer_cost). The trainer sums the bytes over the ranks and
// averages the seconds (Note [Tokens per expert] in train/moe_metrics.h).
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "models/causal_lm.h"
#include "moe/expert_dispatch.h"
#include "nn/aux_outputs.h"

namespace trident::parallel {

// Where an exchange records its bytes and seconds (Note [Exchange cost per layer]): layer
// `layer`'s sums in `aux` (not owned; null: not recorded).
struct ExchangeCost {
  nn::AuxOutputs* aux = nullptr;
  int64_t layer = 0;
  void add(int64_t bytes, double seconds) const;
};

// Rows of `x` (rows, C) to the ranks of `comm`: send_rows[j] consecutive rows to rank j; the
// result holds recv_rows[i] rows from rank i, rank after rank. Differentiable: the backward
// sends the gradient's rows back the other way, times `grad_scale` (Note [Expert gradients over
// expert parallelism]). Both directions record their cost in `cost`.
Tensor all_to_all_rows(const Tensor& x, const std::vector<int64_t>& send_rows, const std::vector<int64_t>& recv_rows,
                       comm::Communicator& comm, double grad_scale, ExchangeCost cost = {});

class AllToAllExperts final : public moe::ExpertDispatch {
 public:
  // Rank `comm.rank()` of `comm` (the ep axis) holds experts [rank E / n, (rank + 1) E / n).
  // The exchanges record their cost in `cost`.
  AllToAllExperts(comm::Communicator& comm, int64_t experts, ExchangeCost cost = {});
  int64_t first() const override { return first_; }
  int64_t count() const override { return count_; }
  Tensor run(const Tensor& xs, const std::vector<int64_t>& counts, const moe::LocalExperts& local) const override;

 private:
  comm::Communicator& comm_;
  int64_t experts_, count_, first_;
  ExchangeCost cost_;
};

// Gives every mixture-of-experts layer of `model` the all-to-all dispatch over `ep` (its own,
// recording into the model's AuxOutputs: Note [Exchange cost per layer]) and frees the
// weights of the experts other ep ranks hold (they are never used here). Returns how many
// layers it applied to.
int64_t apply_expert_parallel(models::CausalLM& model, comm::Communicator& ep);

}  // namespace trident::parallel
