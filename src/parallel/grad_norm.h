// Global-norm gradient clipping of a model whose parameters are spread over a mesh: the
// squares of a parameter tensor parallelism splits are summed over the tensor-parallel group
// (a replicated one counts once), and everything over the pipeline stages, each of which
// holds other parameters. Which parameters are split is the placement table's
// (parallel/placement.h). An expert's parameters (expert parallelism) are held by one ep rank
// each: their squares are summed over the ep group. The arithmetic is that of torch.nn.utils.clip_grad_norm_ over the
// single-device model, up to the order of the sums.
#pragma once

#include <vector>

#include "comm/communicator.h"
#include "nn/module.h"
#include "parallel/placement.h"

namespace trident::parallel {

// Clips the gradients of `params` (this rank's: its stage's, its tensor-parallel shards) to a
// global norm of `max_norm` (<= 0: only measures) and returns the norm before clipping.
// `placements` says which are split over `tp` (null: none); `tp` and `pp` may be null.
double clip_grad_norm_sharded(const std::vector<nn::NamedTensor>& params, const PlacementTable* placements,
                              comm::Communicator* tp, comm::Communicator* pp, double max_norm,
                              comm::Communicator* ep = nullptr);

}  // namespace trident::parallel
