// Where a ZeRO rank's optimizer state lives: the fp32 masters of its shard (when they are apart
// from the parameters: mixed precision, offload) and AdamW's m and v, bucket by bucket.
//   in memory  one flat buffer each on the optimizer's device (pinned host memory under
//              ZeRO-Offload): every bucket is resident, acquire() returns views
//   on NVMe    ZeRO-Infinity's optimizer tier (offload/nvme_file.h): one scratch file per
//              optimizer under parallel.nvme_path, a region per bucket ([masters | m | v], each
//              aligned), and parallel.nvme_buffer_count staging buffers in host memory. The
//              optimizer walks the buckets in order, prefetching the next buffers' regions while
//              it steps one and writing each back as soon as it is stepped (Note [The tier's
//              pipeline]); host memory holds buffer_count buckets' state, not the shard's.
//
// Note [The tier's pipeline]
// A buffer holds one bucket at a time: free, reading, held (acquired), or writing. prefetch(b)
// starts reading b into a free buffer (one whose write, if any, is waited for first), or does
// nothing when none is free; acquire(b) waits for b's read (or starts and waits for it) and
// hands out views of the buffer; release(b, modified) starts writing them back. A prefetch
// takes only a buffer whose write is done, so reads ahead never wait for writes behind; an
// acquire that finds no buffer free waits for the oldest write. The last writes of a step are
// handed to the kernel (nvme_queue_depth requests at a time, offload/nvme_file.h) and the rest
// go out at the next step's first call; the buffers they come from are waited for before reuse.
// A bucket never written reads as zeros (m and v start so; the masters are written once from
// the parameters before the first step).
//
// A checkpoint of a tier run copies each bucket's state out (ZeroOptimizer::pieces): while it
// is written, the shard is in host memory once. Streaming the pieces bucket by bucket is left.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>

#include "core/tensor.h"
#include "parallel/zero/layout.h"

namespace trident::parallel::zero {

// Views of one bucket's state, this rank's shard_len(b) elements each.
struct BucketState {
  std::optional<Tensor> masters;  // absent when the parameters are the masters
  std::optional<Tensor> m, v;     // absent before allocate_moments (in memory)
};

struct NvmeStateOptions {
  std::filesystem::path dir;  // parallel.nvme_path
  int buffer_count = 2;       // staging buffers: the bucket stepped and those read ahead
  int queue_depth = 8;        // requests in flight
};

class StateStore {
 public:
  virtual ~StateStore() = default;
  // Allocates AdamW's m and v where they are held in memory (called where the optimizer makes
  // them: Note [ZeRO's allocation order] in zero.cc).
  virtual void allocate_moments() {}
  // Whether every bucket's state stays in memory (acquire returns views of it).
  virtual bool resident() const = 0;
  // Starts bringing bucket b's state in.
  virtual void prefetch(const Bucket& b) {}
  // Bucket b's state, valid until release(b).
  virtual BucketState acquire(const Bucket& b) = 0;
  // Done with bucket b's state; `modified`: it goes back to where it is kept.
  virtual void release(const Bucket& b, bool modified) {}
  // Waits for every transfer in flight.
  virtual void flush() {}
  // Bytes read from and written to the tier so far, and the seconds the optimizer waited for
  // them (0 in memory).
  virtual int64_t bytes_read() const { return 0; }
  virtual int64_t bytes_written() const { return 0; }
  virtual double wait_seconds() const { return 0.0; }
};

// A buffer of this rank's concatenated shards' size, f32 zeros, on `state_device`: the
// optimizer's, pinned host memory when that is not the parameters' device (so its copies to
// and from the device run at full speed).
Tensor shard_state_buffer(const ZeroLayout& layout, Device state_device, MemoryCategory category);

// In memory, on `device`: masters only when `masters` (allocated now), m and v at
// allocate_moments().
std::unique_ptr<StateStore> memory_state(const ZeroLayout& layout, Device device, bool masters);
// On NVMe; the layout's parameters must be on the host (the CPU steps the state).
std::unique_ptr<StateStore> nvme_state(const ZeroLayout& layout, bool masters, const NvmeStateOptions& options);

}  // namespace trident::parallel::zero
