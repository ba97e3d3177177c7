// ZeRO 1-2's parameters: one flat buffer of every parameter in the compute dtype (the
// parameters are views of it), the same on every rank: 4P bytes in fp32, 2P in bf16/fp16.
// After AdamW updates this rank's shard, every bucket is all-gathered in place, so all ranks
// hold the full updated parameters again. Checkpoints load every parameter whole.
//
// Not here: sharded parameters (sharded_parameters.h); these have no part hooks.
#pragma once

#include "comm/communicator.h"
#include "parallel/zero/parameters.h"

namespace trident::parallel::zero {

class ReplicatedParameters final : public ParameterHolder {
 public:
  // Allocates the flat buffer (MemoryCategory::kParameter) and takes every bucket's values.
  // `stage` names the stage in errors.
  ReplicatedParameters(const ZeroLayout& layout, comm::Communicator& comm, DType compute, int stage,
                       const TakeValues& take_values);

  Tensor shard(const Bucket& b) override;
  void gradients_done(size_t) override {}
  // Everyone's updated shards, in place into the flat parameters.
  void stepped() override;
  // Throws: nothing to gather.
  Tensor run(size_t part, const nn::PartForward& forward, const Tensor& x) override;
  void load_bucket(const Bucket& b, const RangeReader& read) override;
  // Nothing: load_bucket() took the whole parameters.
  void load_segment(const Bucket&, const Segment&, const std::optional<Tensor>&, const RangeReader&) override {}

 private:
  const ZeroLayout& layout_;
  comm::Communicator& comm_;
  const int stage_;
  Tensor flat_;
};

}  // namespace trident::parallel::zero
