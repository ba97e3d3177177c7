#include "parallel/zero/replicated_parameters.h"

#include <memory>
#include <vector>

#include "core/check.h"
#include "core/copy.h"
#include "core/views.h"

namespace trident::parallel::zero {

ReplicatedParameters::ReplicatedParameters(const ZeroLayout& layout, comm::Communicator& comm, DType compute,
                                           int stage, const TakeValues& take_values)
    : layout_(layout), comm_(comm), stage_(stage), flat_(zeros_in(MemoryCategory::kParameter, layout.total(), compute, layout.device())) {
  // The model's parameters become views of the flat buffer (same values everywhere).
  for (const Bucket& b : layout_.buckets()) take_values(b, flat_slice(flat_, b.begin, b.length));
}

Tensor ReplicatedParameters::shard(const Bucket& b) {
  return flat_slice(flat_, layout_.shard_begin(b), layout_.shard_len(b));
}

void ReplicatedParameters::stepped() {
  std::vector<std::unique_ptr<comm::Work>> gathers;
  for (const Bucket& b : layout_.buckets())
    gathers.push_back(comm_.all_gather_async(shard(b), flat_slice(flat_, b.begin, b.length)));
  for (auto& w : gathers) w->wait();
}

Tensor ReplicatedParameters::run(size_t, const nn::PartForward&, const Tensor&) {
  TRI_THROW(ErrorKind::kValue, "ZeRO stage ", stage_, " does not shard parameters: it has no part hooks");
}

void ReplicatedParameters::load_bucket(const Bucket& b, const RangeReader& read) {
  // Every rank holds the whole parameter (rounded, under mixed precision).
  for (size_t k : b.params) {
    const Tensor p = layout_.param(k);
    core::copy_(views::view(p, {p.numel()}), read(layout_.name(k), 0, p.numel()));
  }
}

}  // namespace trident::parallel::zero
