// ZeRO-3's parameters: this rank keeps only its shard of every part's parameters (4P/N bytes
// in fp32), one bucket per part of the model (nn/part_hooks.h: a transformer block, or the
// root). Each part's parameters are views of the part's own full buffer, whose storage holds
// memory only while gathered (StorageImpl::reset_data; saved tensors keep pointing at the same
// storage, so autograd never knows the memory came and went). As the model's part hooks it
// all-gathers a part's parameters into that buffer just before the part's forward,
// prefetching the next part's, and frees the buffer after it; a backward hook on the part's
// output gathers it again just before the part's backward (prefetching the part backward
// reaches next), and the buffer is freed once the part's gradients are all in and
// reduce-scattering. At most three parts are gathered at once: the root, the running part and
// the prefetched one. Per micro-batch each rank hands 2P elements to all-gathers (forward and
// backward); after a step nothing is gathered: the next forward gathers the updated shards.
//
// Where the shard lives is the parameter store's (parameter_store.h): in memory, or on NVMe
// (parallel.offload_param), read ahead of each gather and written back as each bucket is
// stepped, with the model on the host or on a device.
//
// Note [The parameter tier behind a device]
// With the model on a device the tier's staging buffers stay in host memory (io_uring reads
// into them and writes from them with O_DIRECT), and the device holds no shard at all (its
// MemoryCategory::kParameter: nothing). To gather a part, its staged shard is copied straight
// into this rank's block of the part's gathered buffer (kGatheredParameter, allocated for the
// gather anyway) and the all-gather runs in place there (the communicators' in-place form). The
// copy is core::copy_bytes_: synchronous, so the staging buffer goes back to the tier (for its
// read-ahead) as soon as it returns, and on a GPU it is ordered before the all-gather on the
// device's stream; and, as a communicator's write, it leaves the buffer's version alone (the
// backward's gather refills the buffer whose views autograd saved in the forward). The other
// way, the host's AdamW (ZeRO-Offload; the tier needs it) rounds the stepped masters into the
// tier's buffer for the part, which is written to the disk: no device copy of the shard exists
// between a step and the next gather, which reads the region back. Tested on the emulated
// device (tests/parallel/nvme_param_test.cc); not measured on a GPU, where pinned staging
// buffers and a copy that overlaps the previous part's compute are the obvious next steps.
//
// Not here: replicated parameters (replicated_parameters.h), the gradients' reduction
// (staged_gradients.h).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "comm/communicator.h"
#include "parallel/zero/parameter_store.h"
#include "parallel/zero/parameters.h"

namespace trident::parallel::zero {

class ShardedParameters final : public ParameterHolder {
 public:
  // Allocates the parameter shard (MemoryCategory::kParameter, on the layout's device; on NVMe
  // behind host staging buffers when `nvme`) and, one part at a time, the part's full buffer
  // (kGatheredParameter) to take its values, keep this rank's shard and free it.
  ShardedParameters(const ZeroLayout& layout, comm::Communicator& comm, DType compute, const TakeValues& take_values,
                    const std::optional<NvmeParamOptions>& nvme = std::nullopt);
  ~ShardedParameters() override;
  ShardedParameters(const ShardedParameters&) = delete;
  ShardedParameters& operator=(const ShardedParameters&) = delete;

  // The store's buffer to write bucket b's shard into, and its way back (parameter_store.h).
  Tensor shard(const Bucket& b) override;
  void shard_written(const Bucket& b) override;
  // Frees the part's gathered copy.
  void gradients_done(size_t u) override { release(u); }
  // The tier starts reading the next forward's first parts.
  void stepped() override;
  // Gathers part `part`'s parameters around its forward, and marks the output to gather
  // them again for its backward.
  Tensor run(size_t part, const nn::PartForward& forward, const Tensor& x) override;
  void load_bucket(const Bucket&, const RangeReader&) override {}
  // The shard's values, rounded from the masters when they exist.
  void load_segment(const Bucket& b, const Segment& s, const std::optional<Tensor>& masters,
                    const RangeReader& read) override;
  const offload::NvmeFile* tier_file() const override { return store_->file(); }

 private:
  struct Part {
    // The part's full parameters (its parameters are views of it), holding memory only while
    // gathered; the gather in flight.
    std::optional<Tensor> gathered;
    std::unique_ptr<comm::Work> gather;
    enum class State { kReleased, kGathering, kGathered } state = State::kReleased;
    bool staged = false;  // the store's shard is acquired for the gather (until it is done,
                          // unless copied to the device first)
  };
  // Starts gathering part u's parameters (if released); gathers and waits; frees them.
  void start_gather(size_t u);
  void gather_now(size_t u);
  void release(size_t u);

  const ZeroLayout& layout_;
  comm::Communicator& comm_;
  const DType compute_;
  std::unique_ptr<ParameterStore> store_;  // this rank's shard
  std::vector<Part> parts_;
  // Parts whose forward finished in this forward pass, in order (the backward meets them in
  // reverse), and how deep in nested parts the forward is.
  std::vector<size_t> completed_;
  int depth_ = 0;
  std::shared_ptr<bool> alive_;  // the backward hooks' check that this object still exists
};

}  // namespace trident::parallel::zero
