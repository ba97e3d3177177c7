// How a ZeRO rank holds the model's parameters, in the compute dtype: the policy the stage
// chooses.
//   ReplicatedParameters (replicated_parameters.h, stages 1-2)  every parameter, as views of
//       one flat buffer all ranks hold; all-gathered in place after each step
//   ShardedParameters (sharded_parameters.h, stage 3)  this rank's shard only; a part's
//       parameters are gathered around its forward and backward, as the model's part hooks
// Either way the model's parameters become views of the policy's buffers (Tensor::set_data),
// so the model, written for one device, reads them where they are.
//
// Not here: the fp32 masters, which exist apart from the parameters under mixed precision or
// offload (zero.h), the gradients (gradients.h), AdamW (sharded_adamw.h).
#pragma once

#include <cstddef>
#include <functional>
#include <optional>

#include "nn/part_hooks.h"
#include "parallel/zero/layout.h"

namespace trident::offload {
class NvmeFile;
}

namespace trident::parallel::zero {

class ParameterHolder : public nn::PartHooks {
 public:
  // Fills `into` (bucket b's parameters in the compute dtype, laid out as in the flat buffer)
  // with rank 0's values and makes the bucket's parameters views of it: what a policy's
  // constructor calls for each bucket, once its buffer for the bucket exists.
  using TakeValues = std::function<void(const Bucket& b, const Tensor& into)>;

  // This rank's parameters of bucket b, to write new values into (the stepped masters,
  // rounded; a checkpoint's). Every element of b's segments is written, then shard_written(b):
  // on ZeRO-3's NVMe tier the shard is a staging buffer (zeros at first, the same one until
  // shard_written) that shard_written writes back; elsewhere a view of the values.
  virtual Tensor shard(const Bucket& b) = 0;
  virtual void shard_written(const Bucket& b) {}
  // Bucket u's gradients are all in: no op of this backward reads its parameters any more.
  virtual void gradients_done(size_t u) = 0;
  // This rank's shard of every bucket holds the step's updated values.
  virtual void stepped() = 0;
  // Loading a checkpoint: bucket b's parameters, before its segments' values. `read` reads a
  // range of a logical tensor.
  virtual void load_bucket(const Bucket& b, const RangeReader& read) = 0;
  // Then each of this rank's segments `s` of bucket b: `masters` is its slice of the fp32
  // masters when they exist apart from the parameters (already loaded); without them the
  // values come from `read`.
  virtual void load_segment(const Bucket& b, const Segment& s, const std::optional<Tensor>& masters,
                            const RangeReader& read) = 0;
  // The NVMe tier's file holding the shard, for its traffic; null when the shard is in memory.
  virtual const offload::NvmeFile* tier_file() const { return nullptr; }
};

}  // namespace trident::parallel::zero
