// The device mesh: the world's ranks arranged as pp x dp x tp, with rank =
// (pp_rank * dp + dp_rank) * tp + tp_rank, Megatron-LM's order: tensor-parallel peers are
// neighbours (on one host whenever they can be), pipeline stages the slowest-varying. It owns
// the sub-communicator of each axis; layers and strategies receive the one they use, never a
// global. Context and expert axes would join as further dimensions.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "comm/communicator.h"

namespace trident::parallel {

class DeviceMesh {
 public:
  // Splits `world` into tensor-parallel groups (tp consecutive ranks), pipeline groups (the
  // ranks with the same dp and tp position, one per stage) and data-parallel groups (the
  // rest; with tp = pp = 1 that is `world` itself). Throws naming the sizes when the world
  // size is not a multiple of tp x pp.
  DeviceMesh(std::shared_ptr<comm::Communicator> world, int64_t tp, int64_t pp = 1);

  comm::Communicator& world() const { return *world_; }
  comm::Communicator& dp() const { return *dp_; }
  comm::Communicator& tp() const { return *tp_; }
  comm::Communicator& pp() const { return *pp_; }
  int dp_size() const { return dp_->size(); }
  int dp_rank() const { return dp_->rank(); }
  int tp_size() const { return tp_->size(); }
  int tp_rank() const { return tp_->rank(); }
  int pp_size() const { return pp_->size(); }
  int pp_rank() const { return pp_->rank(); }
  // The world rank at these coordinates.
  int rank_at(int pp_rank, int dp_rank, int tp_rank) const {
    return (pp_rank * dp_size() + dp_rank) * tp_size() + tp_rank;
  }
  // Bytes this rank handed to collectives on all of the mesh's communicators.
  int64_t total_bytes() const;
  // Bytes this rank sent on all of them to ranks on its own host and on other hosts.
  std::pair<int64_t, int64_t> link_bytes() const;

 private:
  std::shared_ptr<comm::Communicator> world_, dp_, tp_, pp_;
};

}  // namespace trident::parallel
