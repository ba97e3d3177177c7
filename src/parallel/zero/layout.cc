#include "parallel/zero/layout.h"

#include <algorithm>

#include "core/check.h"
#include "core/factory.h"
#include "core/views.h"
#include "parallel/buckets.h"

namespace trident::parallel::zero {

Tensor flat_slice(const Tensor& flat, int64_t begin, int64_t length) { return views::narrow(flat, 0, begin, length); }

Tensor zeros_in(MemoryCategory category, int64_t numel, DType dtype, Device device) {
  MemoryCategoryGuard guard(category);
  return zeros({numel}, dtype, device);
}

ZeroLayout::ZeroLayout(const std::vector<nn::NamedTensor>& params, int rank, int size) : rank_(rank), size_(size) {
  for (const auto& [name, p] : params) {
    TRI_CHECK(p.dtype() == DType::kF32 && p.is_contiguous(), "ZeRO: parameter '", name,
              "' must be a contiguous f32 tensor, got ", p.dtype(), " ", p.shape());
    TRI_CHECK(params_.empty() || p.device() == params_.front().device(), "ZeRO: parameter '", name, "' is on ",
              p.device(), ", the others on ", params_.front().device(), "; move the model to one device");
    names_.push_back(name);
    params_.push_back(p);
  }
  if (!params_.empty()) device_ = params_.front().device();
}

ZeroLayout ZeroLayout::by_size(const std::vector<nn::NamedTensor>& params, int rank, int size, int64_t limit) {
  ZeroLayout out(params, rank, size);
  out.lay_out(group_in_buckets(out.params_, limit));  // as data parallelism's
  return out;
}

ZeroLayout ZeroLayout::by_parts(const std::vector<nn::NamedTensor>& params, int rank, int size,
                                const std::vector<std::vector<size_t>>& parts) {
  ZeroLayout out(params, rank, size);
  std::vector<int> seen(out.params_.size(), 0);  // every parameter in exactly one part
  for (const auto& part : parts)
    for (size_t k : part) {
      TRI_CHECK(k < out.params_.size(), "ZeRO-3: part index ", k, " is out of range (", out.params_.size(),
                " parameters)");
      ++seen[k];
    }
  for (size_t k = 0; k < out.params_.size(); ++k)
    TRI_CHECK(seen[k] == 1, "ZeRO-3: parameter '", out.names_[k], "' is in ", seen[k], " parts; it must be in exactly one");
  out.lay_out(parts);
  return out;
}

void ZeroLayout::lay_out(const std::vector<std::vector<size_t>>& groups) {
  const int64_t N = size_;
  flat_offset_.resize(params_.size());
  bucket_of_.resize(params_.size());
  for (const std::vector<size_t>& group : groups) {
    Bucket b;
    b.begin = total_;
    int64_t filled = 0;
    for (size_t k : group) {
      flat_offset_[k] = b.begin + filled;
      bucket_of_[k] = buckets_.size();
      filled += params_[k].numel();
    }
    b.params = group;
    b.length = (filled + N - 1) / N * N;
    total_ += b.length;
    buckets_.push_back(std::move(b));
  }
  for (Bucket& b : buckets_) b.mine = segments_of(b, rank_);
}

Tensor ZeroLayout::shard_of(const Tensor& shards, const Bucket& b) const {
  return flat_slice(shards, shard_offset(b), shard_len(b));
}

std::vector<Segment> ZeroLayout::segments_of(const Bucket& b, int rank) const {
  std::vector<Segment> out;
  const int64_t s0 = b.begin + rank * shard_len(b), s1 = s0 + shard_len(b);
  for (size_t k : b.params) {
    const int64_t p0 = flat_offset_[k], p1 = p0 + params_[k].numel();
    const int64_t lo = std::max(s0, p0), hi = std::min(s1, p1);
    if (lo < hi) out.push_back({k, lo, lo - p0, hi - lo});
  }
  return out;
}

}  // namespace trident::parallel::zero
