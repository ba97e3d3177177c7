#include "parallel/mesh.h"

#include "core/check.h"

namespace trident::parallel {

DeviceMesh::DeviceMesh(std::shared_ptr<comm::Communicator> world, int64_t tp, int64_t pp) : world_(std::move(world)) {
  const int64_t n = world_->size();
  TRI_CHECK(tp >= 1 && pp >= 1 && n % (tp * pp) == 0, "the number of ranks (", n, ") must be a multiple of parallel.tp (",
            tp, ") x parallel.pp (", pp, "): the ranks form pp x dp x tp, dp = ranks / (tp x pp)");
  const int r = world_->rank();
  const int64_t dp = n / (tp * pp);
  const int64_t tp_rank = r % tp, dp_rank = (r / tp) % dp, pp_rank = r / (tp * dp);
  tp_ = world_->split(static_cast<int>(r / tp), r);  // consecutive ranks
  pp_ = world_->split(static_cast<int>(dp_rank * tp + tp_rank), r);
  dp_ = tp == 1 && pp == 1 ? world_
                           : std::shared_ptr<comm::Communicator>(world_->split(static_cast<int>(pp_rank * tp + tp_rank), r));
}

int64_t DeviceMesh::total_bytes() const {
  int64_t bytes = world_->stats().total_bytes() + tp_->stats().total_bytes() + pp_->stats().total_bytes();
  if (dp_ != world_) bytes += dp_->stats().total_bytes();
  return bytes;
}

std::pair<int64_t, int64_t> DeviceMesh::link_bytes() const {
  std::pair<int64_t, int64_t> sum{0, 0};
  for (const comm::Communicator* c : {world_.get(), tp_.get(), pp_.get(), dp_ != world_ ? dp_.get() : nullptr})
    if (c != nullptr) {
      sum.first += c->stats().intra_host_bytes;
      sum.second += c->stats().inter_host_bytes;
    }
  return sum;
}

}  // namespace trident::parallel
