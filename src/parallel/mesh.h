// The device mesh: the world's ranks arranged as dp x tp, tensor-parallel peers adjacent
// (rank = dp_rank * tp + tp_rank, Megatron-LM's order: tp varies fastest, so a tensor-parallel
// group shares a host whenever it can). It owns the sub-communicator of each axis; layers and
// strategies receive the one they use, never a global. Pipeline, context and expert axes
// join as further dimensions (slower-varying than tp).
#pragma once

#include <cstdint>
#include <memory>

#include "comm/communicator.h"

namespace trident::parallel {

class DeviceMesh {
 public:
  // Splits `world` into groups of `tp` consecutive ranks (tensor parallel) and groups of the
  // ranks with the same tp rank (data parallel, dp = world / tp; with tp = 1 that is `world`
  // itself). Throws naming the sizes when the world size is not a multiple of tp.
  DeviceMesh(std::shared_ptr<comm::Communicator> world, int64_t tp);

  comm::Communicator& world() const { return *world_; }
  comm::Communicator& dp() const { return *dp_; }
  comm::Communicator& tp() const { return *tp_; }
  int dp_size() const { return dp_->size(); }
  int dp_rank() const { return dp_->rank(); }
  int tp_size() const { return tp_->size(); }
  int tp_rank() const { return tp_->rank(); }
  // Bytes this rank handed to collectives on all of the mesh's communicators.
  int64_t total_bytes() const;

 private:
  std::shared_ptr<comm::Communicator> world_, dp_, tp_;
};

}  // namespace trident::parallel
