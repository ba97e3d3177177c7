#include "parallel/mesh.h"

#include "core/check.h"

namespace trident::parallel {

DeviceMesh::DeviceMesh(std::shared_ptr<comm::Communicator> world, int64_t tp) : world_(std::move(world)) {
  const int64_t n = world_->size();
  TRI_CHECK(tp >= 1 && n % tp == 0, "parallel.tp (", tp, ") must divide the number of ranks (", n,
            "): the ranks form data-parallel groups of tp tensor-parallel ranks (world = dp x tp)");
  const int r = world_->rank();
  tp_ = world_->split(static_cast<int>(r / tp), r);  // consecutive ranks
  dp_ = tp == 1 ? world_ : std::shared_ptr<comm::Communicator>(world_->split(static_cast<int>(r % tp), r));
}

int64_t DeviceMesh::total_bytes() const {
  int64_t bytes = world_->stats().total_bytes() + tp_->stats().total_bytes();
  if (dp_ != world_) bytes += dp_->stats().total_bytes();
  return bytes;
}

}  // namespace trident::parallel
