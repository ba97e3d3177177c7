// ZeRO's flat layout: every parameter gets a place in one flat index space, in buckets each
// padded to a multiple of the rank count N and laid out back to back. Rank k owns the k-th
// 1/N of every bucket (its *shard*); a rank's shards of all buckets, concatenated, are the
// shape of every per-rank buffer (masters, AdamW's m and v, the gradient shard, stage 3's
// parameter shard): bucket b's shard starts at b.begin / N there.
//   stages 1-2  buckets of about bucket_bytes in reverse registration order (the backward's;
//               parallel/buckets.h), so that a bucket's gradients complete together
//   stage 3     one bucket per part of the model (nn/part_hooks.h), so that a part's
//               parameters are gathered together
// A *segment* is the part of one parameter that falls in a rank's shard of a bucket: the unit
// AdamW steps and checkpoints save.
//
// Index arithmetic, and the one helper the pieces allocate their buffers with; nothing is
// communicated here.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/tensor.h"
#include "nn/module.h"

namespace trident::parallel::zero {

struct Segment {  // the part of one parameter inside a rank's shard of a bucket
  size_t param;
  int64_t flat;      // offset in the flat buffer
  int64_t in_param;  // offset in the parameter
  int64_t length;
};

struct Bucket {
  int64_t begin = 0, length = 0;  // in the flat buffer; length % N == 0
  std::vector<size_t> params;
  std::vector<Segment> mine;  // this rank's segments
};

// Reads elements [begin, end) of a logical tensor's flattening from a checkpoint.
using RangeReader = std::function<Tensor(const std::string& name, int64_t begin, int64_t end)>;

class ZeroLayout {
 public:
  // `params`: contiguous f32 tensors on one device. Stages 1-2: buckets of about `limit`
  // elements.
  static ZeroLayout by_size(const std::vector<nn::NamedTensor>& params, int rank, int size, int64_t limit);
  // Stage 3: one bucket per entry of `parts` (indices into `params`, every parameter in exactly
  // one).
  static ZeroLayout by_parts(const std::vector<nn::NamedTensor>& params, int rank, int size,
                             const std::vector<std::vector<size_t>>& parts);

  int rank() const { return rank_; }
  int size() const { return size_; }
  Device device() const { return device_; }  // the parameters', where every flat buffer lives
  size_t num_params() const { return params_.size(); }
  const std::string& name(size_t k) const { return names_[k]; }
  const std::vector<std::string>& names() const { return names_; }
  Tensor param(size_t k) const { return params_[k]; }
  int64_t flat_offset(size_t k) const { return flat_offset_[k]; }  // param k in the flat buffer
  size_t bucket_of(size_t k) const { return bucket_of_[k]; }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  size_t index_of(const Bucket& b) const { return static_cast<size_t>(&b - buckets_.data()); }
  int64_t total() const { return total_; }                 // elements of the flat buffer
  int64_t shard_total() const { return total_ / size_; }  // of a rank's concatenated shards

  int64_t shard_len(const Bucket& b) const { return b.length / size_; }
  // This rank's shard of b: where it starts in the flat buffer, and in the concatenated shards.
  int64_t shard_begin(const Bucket& b) const { return b.begin + rank_ * shard_len(b); }
  int64_t shard_offset(const Bucket& b) const { return b.begin / size_; }
  // Bucket b's part of a buffer of concatenated shards (masters, m, v, ...).
  Tensor shard_of(const Tensor& shards, const Bucket& b) const;
  // The parts of bucket b's parameters inside rank `rank`'s shard (b.mine for this rank).
  std::vector<Segment> segments_of(const Bucket& b, int rank) const;

 private:
  ZeroLayout(const std::vector<nn::NamedTensor>& params, int rank, int size);
  void lay_out(const std::vector<std::vector<size_t>>& groups);

  int rank_, size_;
  Device device_ = Device::cpu();
  std::vector<std::string> names_;
  std::vector<Tensor> params_;
  std::vector<int64_t> flat_offset_;  // param -> offset in the flat buffer
  std::vector<size_t> bucket_of_;
  std::vector<Bucket> buckets_;
  int64_t total_ = 0;
};

// A length-`length` view of the flat buffer `flat` from `begin`.
Tensor flat_slice(const Tensor& flat, int64_t begin, int64_t length);

// `numel` zeros of `dtype` on `device`, counted under `category` (each piece's buffers have
// theirs: the planner predicts every category's peak).
Tensor zeros_in(MemoryCategory category, int64_t numel, DType dtype, Device device);

}  // namespace trident::parallel::zero
