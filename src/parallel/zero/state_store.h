// Where a ZeRO rank's optimizer state lives: the fp32 masters of its shard (when they are apart
// from the parameters: mixed precision, offload) and AdamW's m and v, in *units*: ranges of the
// rank's concatenated shards (zero/layout.h) that are brought in and out together.
//   in memory  one flat buffer each on the optimizer's device (pinned host memory under
//              ZeRO-Offload), a unit per bucket: every unit is resident, acquire() returns views
//   on NVMe    ZeRO-Infinity's optimizer tier (offload/nvme_file.h): one scratch file per
//              optimizer under parallel.nvme_path, units of a fixed size cut across the buckets
//              (AdamW is elementwise: any cut gives the same values), a region each ([masters |
//              m | v], each aligned), and parallel.nvme_buffer_count staging buffers of one unit
//              in host memory. The optimizer walks the units in order, prefetching the next ones
//              while it steps one and writing each back as soon as it is stepped (Note [The
//              tier's pipeline]); host memory holds buffer_count units' state, whatever the size
//              of the largest parameter.
//
// Note [The tier's pipeline]
// A buffer holds one unit at a time: free, reading, held (acquired), or writing. prefetch(u)
// starts reading u into a free buffer, or does nothing when none is free; acquire(u) waits for
// u's read (or starts and waits for it) and hands out views of the buffer; release(u, modified)
// starts writing them back. A prefetch takes only a buffer whose write is done, so reads ahead
// never wait for writes behind; an acquire that finds no buffer free waits for the oldest
// write. The last writes of a step are handed to the kernel (nvme_queue_depth requests at a
// time, offload/nvme_file.h) and the rest go out at the next step's first call; the buffers
// they come from are waited for before reuse. A unit never written reads as zeros (m and v
// start so; the masters are written once from the parameters before the first step).
//
// A checkpoint of a tier run reads the state back piece by piece as it is written
// (Note [Streaming the tier into a checkpoint] in zero.cc): host memory holds one piece.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "parallel/zero/layout.h"

namespace trident::parallel::zero {

// A range of the rank's concatenated shards (bucket b's shard is [shard_offset(b),
// shard_offset(b) + shard_len(b))).
struct StateUnit {
  int64_t begin = 0, length = 0;
};

// Views of one unit's state, its length each.
struct UnitState {
  std::optional<Tensor> masters;  // absent when the parameters are the masters
  std::optional<Tensor> m, v;     // absent before allocate_moments (in memory)
};

// Where [begin, begin + length) of the concatenated shards falls: one entry per unit it
// overlaps, in order.
struct UnitSpan {
  size_t unit;
  int64_t in_unit, in_range, length;  // offsets in the unit and in the range; elements
};
std::vector<UnitSpan> spans_of(const std::vector<StateUnit>& units, int64_t begin, int64_t length);

// The tier's units of a rank's state of `total` elements whose parameter segments are
// `segments` ([begin, end) in its concatenated shards, sorted): at most `limit` (>= 64)
// elements each, a cut inside a segment at a 16-element step from its start (Note [Units that
// keep the update's bits] in state_store.cc). The planner cuts its prediction with it too.
std::vector<StateUnit> cut_units(const std::vector<std::pair<int64_t, int64_t>>& segments, int64_t total, int64_t limit);

struct NvmeStateOptions {
  std::filesystem::path dir;            // parallel.nvme_path
  int buffer_count = 2;                 // staging buffers: the unit stepped and those read ahead
  int queue_depth = 128;                // requests in flight
  int64_t unit_elements = int64_t{1} << 23;  // 32 MiB of each of masters, m and v
};

class StateStore {
 public:
  virtual ~StateStore() = default;
  const std::vector<StateUnit>& units() const { return units_; }
  // Allocates AdamW's m and v where they are held in memory (called where the optimizer makes
  // them: Note [ZeRO's allocation order] in zero.cc).
  virtual void allocate_moments() {}
  // Whether every unit's state stays in memory (acquire returns views of it).
  virtual bool resident() const = 0;
  // Starts bringing unit u's state in.
  virtual void prefetch(size_t u) {}
  // Unit u's state, valid until release(u).
  virtual UnitState acquire(size_t u) = 0;
  // Done with unit u's state; `modified`: it goes back to where it is kept.
  virtual void release(size_t u, bool modified) {}
  // Waits for every transfer in flight.
  virtual void flush() {}
  // Bytes requested from and to the tier so far, and the seconds the optimizer waited for them
  // (0 in memory).
  virtual int64_t bytes_read() const { return 0; }
  virtual int64_t bytes_written() const { return 0; }
  virtual double wait_seconds() const { return 0.0; }

 protected:
  std::vector<StateUnit> units_;
};

// A buffer of this rank's concatenated shards' size, f32 zeros, on `state_device`: the
// optimizer's, pinned host memory when that is not the parameters' device (so its copies to
// and from the device run at full speed).
Tensor shard_state_buffer(const ZeroLayout& layout, Device state_device, MemoryCategory category);

// In memory, on `device`, a unit per bucket: masters only when `masters` (allocated now), m and
// v at allocate_moments().
std::unique_ptr<StateStore> memory_state(const ZeroLayout& layout, Device device, bool masters);
// On NVMe, staged through host memory, where the CPU steps it, whatever device the parameters
// are on (a device's gradient shard comes to the host first: ZeRO-Offload's path).
std::unique_ptr<StateStore> nvme_state(const ZeroLayout& layout, bool masters, const NvmeStateOptions& options);

}  // namespace trident::parallel::zero
