// Where ZeRO-3 keeps this rank's parameter shard (compute dtype, a bucket per part of the
// model; zero/sharded_parameters.h gathers them):
//   in memory  one flat buffer of the concatenated shards (MemoryCategory::kParameter) on the
//              parameters' device; every call returns a view of it
//   on NVMe    ZeRO-Infinity's parameter tier (parallel.offload_param = "nvme", DeepSpeed's
//              offload_param): a scratch file per rank under parallel.nvme_path with one
//              aligned region per bucket, and staging buffers in host memory (kParameter, the
//              only parameter shard memory there is, with the model on the host or on a
//              device) that hold a part's shard while it is all-gathered (or, behind a
//              device, copied to the device to be: Note [The parameter tier behind a device]
//              in sharded_parameters.h), read ahead, or written back (Note [The parameter
//              tier's pipeline]). Behind a device: tested on the emulated device, not
//              measured on a GPU.
// A shard is read to be all-gathered (acquire/release) and written whole with new values: the
// initial ones, a checkpoint's, or a step's rounded masters (to_write/written). The tier's
// values are never produced by anything but those writes: the fp32 masters live apart (the
// optimizer's, offloaded), so nothing reads a shard back to step it.
//
// Note [The parameter tier's pipeline]
// Why a plan, and what is read when? ZeRO-3 all-gathers every part twice per micro-batch, in an
// order that repeats: the forward's (the parts as listed: the root, then the blocks) and the
// backward's (the root, then the blocks from the last). The tier records the order of the
// last training micro-batch's acquisitions (before the first: the forward's listing) as its
// plan, and after each acquisition makes sure the next `prefetch_depth` entries of the plan are
// read or reading: each read then overlaps that many parts' compute, beyond the part ZeRO-3
// already gathers ahead. A staging buffer is freed when it is released unless its part is
// among those next entries (at the forward's end the last block's, which the backward gathers
// again two parts later: its shard is not read twice). Writes leave their buffers holding the
// new values until the buffer is needed for another part (least recently used first), so
// memory stays at prefetch_depth + 1 buffers of a part's shard, whatever the model's size.
// After a step (and the constructor's writes) the plan's first parts are read at once: the
// next forward's first gathers find them. A micro-batch reads 2x the shard's regions less the
// last block's; a step writes every region once. Nothing is read ahead across a step: the
// plan covers one micro-batch, and a write goes through the part's buffer when there is one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>

#include "core/tensor.h"
#include "parallel/zero/layout.h"

namespace trident::offload {
class NvmeFile;
}

namespace trident::parallel::zero {

struct NvmeParamOptions {
  std::filesystem::path dir;  // parallel.nvme_path
  int prefetch_depth = 2;     // parallel.nvme_prefetch_depth
  int queue_depth = 128;      // parallel.nvme_queue_depth
};

class ParameterStore {
 public:
  virtual ~ParameterStore() = default;
  // Bucket u's shard to all-gather from, valid until release(u); the tier reads it (or finds it
  // read ahead) into host memory, wherever the parameters are, and throws naming the file and
  // offset when the bytes are not what it wrote.
  virtual Tensor acquire(size_t u) = 0;
  virtual void release(size_t u) {}
  // Bucket u's shard to write new values into, every element (the tier's starts as zeros, in
  // host memory); the same buffer until written(u), which puts it back.
  virtual Tensor to_write(size_t u) = 0;
  virtual void written(size_t u) {}
  // A forward pass begins (`training`: its backward follows and its order becomes the plan).
  virtual void begin_forward(bool training) {}
  // The values changed (a step, the initial values): start reading the next forward's parts.
  virtual void read_ahead() {}
  // The tier's file, for its traffic (null in memory).
  virtual const offload::NvmeFile* file() const { return nullptr; }
};

// In memory: the concatenated shards, zeros of `compute` (allocated now, kParameter).
std::unique_ptr<ParameterStore> memory_parameters(const ZeroLayout& layout, DType compute);
// On NVMe, its buffers in host memory whatever the layout's device.
std::unique_ptr<ParameterStore> nvme_parameters(const ZeroLayout& layout, DType compute,
                                                const NvmeParamOptions& options);

}  // namespace trident::parallel::zero
