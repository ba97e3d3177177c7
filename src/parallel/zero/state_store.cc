#include "parallel/zero/state_store.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <utility>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/copy.h"
#include "core/factory.h"
#include "offload/nvme_file.h"
#include "parallel/zero/nvme_staging.h"

namespace trident::parallel::zero {

Tensor shard_state_buffer(const ZeroLayout& layout, Device state_device, MemoryCategory category) {
  if (state_device == layout.device()) return zeros_in(category, layout.shard_total(), DType::kF32, layout.device());
  MemoryCategoryGuard guard(category);
  Tensor t = empty_pinned({layout.shard_total()}, DType::kF32);
  fill_(t, 0.0);
  return t;
}

std::vector<UnitSpan> spans_of(const std::vector<StateUnit>& units, int64_t begin, int64_t length) {
  std::vector<UnitSpan> out;
  const int64_t end = begin + length;
  // The units are sorted and contiguous: the first whose end passes begin, then on.
  auto it = std::upper_bound(units.begin(), units.end(), begin,
                             [](int64_t x, const StateUnit& u) { return x < u.begin + u.length; });
  for (; it != units.end() && it->begin < end; ++it) {
    const int64_t lo = std::max(begin, it->begin), hi = std::min(end, it->begin + it->length);
    if (hi > lo) out.push_back({static_cast<size_t>(it - units.begin()), lo - it->begin, lo - begin, hi - lo});
  }
  return out;
}

// Note [Units that keep the update's bits]
// The CPU AdamW steps 16-element blocks from a tensor's start with vector code and the last
// few elements with scalar code, which may differ by an ulp. A unit boundary inside a
// parameter's segment therefore falls a multiple of 16 elements from the segment's start: both
// parts then put the same elements through the same code as the whole segment would, and the
// tier's updates equal the in-memory ones bit for bit. Units are at most `limit` elements.
std::vector<StateUnit> cut_units(const std::vector<std::pair<int64_t, int64_t>>& segments, int64_t total, int64_t limit) {
  std::vector<StateUnit> units;
  for (int64_t begin = 0; begin < total;) {
    int64_t end = std::min(total, begin + limit);
    if (end < total) {
      const auto it = std::upper_bound(segments.begin(), segments.end(), std::pair<int64_t, int64_t>{end, INT64_MAX});
      if (it != segments.begin() && std::prev(it)->first < end && end < std::prev(it)->second) {
        const int64_t s0 = std::prev(it)->first;
        end = s0 + (end - s0) / 16 * 16;  // > begin: limit >= 64
      }
    }
    units.push_back({begin, end - begin});
    begin = end;
  }
  return units;
}

namespace {

class MemoryState final : public StateStore {
 public:
  MemoryState(const ZeroLayout& layout, Device device, bool masters) : layout_(layout), device_(device) {
    for (const Bucket& b : layout.buckets()) units_.push_back({layout.shard_offset(b), layout.shard_len(b)});
    if (masters) masters_ = shard_state_buffer(layout, device, MemoryCategory::kOptimizerState);
  }
  void allocate_moments() override {
    m_ = shard_state_buffer(layout_, device_, MemoryCategory::kOptimizerState);
    v_ = shard_state_buffer(layout_, device_, MemoryCategory::kOptimizerState);
  }
  bool resident() const override { return true; }
  UnitState acquire(size_t u) override {
    const StateUnit& unit = units_[u];
    UnitState s;
    if (masters_) s.masters = flat_slice(*masters_, unit.begin, unit.length);
    if (m_) {  // before allocate_moments (the masters' first values): none yet
      s.m = flat_slice(*m_, unit.begin, unit.length);
      s.v = flat_slice(*v_, unit.begin, unit.length);
    }
    return s;
  }

 private:
  const ZeroLayout& layout_;
  const Device device_;
  std::optional<Tensor> masters_;
  std::optional<Tensor> m_, v_;
};

class NvmeState final : public StateStore {
 public:
  NvmeState(const ZeroLayout& layout, bool masters, const NvmeStateOptions& options)
      : layout_(layout), arrays_(masters ? 3 : 2), buffer_count_(options.buffer_count) {
    TRI_CHECK(options.buffer_count >= 1, "parallel.nvme_buffer_count = ", options.buffer_count, " (at least 1)");
    units_ = cut_units(layout, std::max<int64_t>(options.unit_elements, 64));
    int64_t offset = 0, largest = 0;
    for (const StateUnit& u : units_) {
      region_.push_back(offset);
      offset += arrays_ * part_bytes(u);
      largest = std::max(largest, part_bytes(u));
    }
    written_.assign(units_.size(), false);
    buffers_.reserve(static_cast<size_t>(options.buffer_count));  // Buffer pointers stay valid
    largest_part_ = largest;
    file_ = create_tier_file(options.dir, "optimizer", offset, options.queue_depth);
  }
  ~NvmeState() override {
    try {
      flush();
    } catch (...) {  // destructors must not throw; the tier is scratch
    }
  }
  bool resident() const override { return false; }

  void prefetch(size_t k) override {
    file_->poll();
    if (find(k) != nullptr) return;
    Buffer* free = take_free(false);
    if (free != nullptr) start_read(*free, k);
  }

  UnitState acquire(size_t k) override {
    Buffer* buf = find(k);
    if (buf == nullptr) {
      buf = take_free(true);
      TRI_CHECK(buf != nullptr, "the NVMe tier: all ", buffer_count_,
                " staging buffers are held (parallel.nvme_buffer_count): release one before acquiring another");
      start_read(*buf, k);
    }
    try {
      if (buf->read) file_->wait(*std::exchange(buf->read, std::nullopt));
      if (buf->write) file_->wait(*std::exchange(buf->write, std::nullopt));  // the same bytes, again
    } catch (...) {
      buf->bucket = -1;  // its bytes are not the bucket's
      throw;
    }
    buf->held = true;
    const int64_t n = units_[k].length, part = part_bytes(units_[k]) / 4;
    UnitState s;
    int at = 0;
    if (arrays_ == 3) s.masters = flat_slice(buf->data, part * at++, n);
    s.m = flat_slice(buf->data, part * at++, n);
    s.v = flat_slice(buf->data, part * at, n);
    return s;
  }

  void release(size_t k, bool modified) override {
    Buffer* buf = find(k);
    TRI_CHECK(buf != nullptr && buf->held, "the NVMe tier: releasing a unit that is not acquired");
    buf->held = false;
    if (!modified) return;
    buf->write = file_->write(region_[k], buf->data.data_ptr<float>(), arrays_ * part_bytes(units_[k]));
    written_[k] = true;
    file_->poll();
  }

  void flush() override {
    for (Buffer& buf : buffers_) {
      if (buf.read) file_->wait(*std::exchange(buf.read, std::nullopt));
      if (buf.write) file_->wait(*std::exchange(buf.write, std::nullopt));
    }
  }
  int64_t bytes_read() const override { return file_->bytes_read(); }
  int64_t bytes_written() const override { return file_->bytes_written(); }
  double wait_seconds() const override { return file_->wait_seconds(); }

 private:
  struct Buffer {
    Tensor data;                       // arrays_ parts of the largest bucket, 4096-byte aligned
    int64_t bucket = -1;               // the unit whose state it holds
    bool held = false;                 // acquired, not yet released
    std::optional<int64_t> read, write;  // tickets in flight
  };

  // The rank's parameter segments, [begin, end) in its concatenated shards, cut into units
  // (Note [Units that keep the update's bits]).
  static std::vector<StateUnit> cut_units(const ZeroLayout& layout, int64_t limit) {
    std::vector<std::pair<int64_t, int64_t>> segments;
    for (const Bucket& b : layout.buckets())
      for (const Segment& seg : b.mine) {
        const int64_t at = layout.shard_offset(b) + (seg.flat - layout.shard_begin(b));
        segments.emplace_back(at, at + seg.length);
      }
    std::sort(segments.begin(), segments.end());
    return zero::cut_units(segments, layout.shard_total(), limit);
  }

  // One array's bytes in a unit's region, aligned for O_DIRECT.
  static int64_t part_bytes(const StateUnit& u) { return offload::nvme_aligned(u.length * 4); }

  Buffer* find(size_t k) {
    for (Buffer& buf : buffers_)
      if (buf.bucket == static_cast<int64_t>(k)) return &buf;
    return nullptr;
  }

  // A buffer to load another bucket into: a new one while fewer than buffer_count exist, else
  // the one not held that was filled longest ago (its write waited for, when `block`; else only
  // one whose write is done); null when there is none.
  Buffer* take_free(bool block) {
    if (static_cast<int>(buffers_.size()) < buffer_count_) {
      buffers_.push_back({aligned_buffer(arrays_ * largest_part_ / 4), -1, false, std::nullopt, std::nullopt});
      order_.push_back(buffers_.size() - 1);
      return &buffers_.back();
    }
    for (size_t i = 0; i < order_.size(); ++i) {
      Buffer& buf = buffers_[order_[i]];
      if (buf.held || buf.read || (!block && buf.write && !file_->done(*buf.write))) continue;
      if (buf.write) file_->wait(*std::exchange(buf.write, std::nullopt));
      std::rotate(order_.begin() + static_cast<std::ptrdiff_t>(i), order_.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                  order_.end());  // now the most recently filled
      buf.bucket = -1;
      return &buf;
    }
    return nullptr;
  }

  void start_read(Buffer& buf, size_t k) {
    buf.bucket = static_cast<int64_t>(k);
    if (!written_[k]) {  // never written: zeros
      fill_(flat_slice(buf.data, 0, arrays_ * part_bytes(units_[k]) / 4), 0.0);
      return;
    }
    buf.read = file_->read(region_[k], buf.data.data_ptr<float>(), arrays_ * part_bytes(units_[k]));
  }

  // `elements` f32 zeros whose first element is aligned for O_DIRECT, in the optimizer's
  // memory category.
  static Tensor aligned_buffer(int64_t elements) {
    Tensor t = aligned_staging(MemoryCategory::kOptimizerState, elements * 4, DType::kF32);
    fill_(t, 0.0);
    return t;
  }

  const ZeroLayout& layout_;
  const int64_t arrays_;  // masters, m, v; or m, v
  const int buffer_count_;
  std::vector<int64_t> region_;  // unit -> offset in the file
  std::vector<bool> written_;
  int64_t largest_part_ = 0;
  std::vector<Buffer> buffers_;
  std::vector<size_t> order_;  // buffers_, least recently filled first
  std::unique_ptr<offload::NvmeFile> file_;
};

}  // namespace

std::unique_ptr<StateStore> memory_state(const ZeroLayout& layout, Device device, bool masters) {
  return std::make_unique<MemoryState>(layout, device, masters);
}

std::unique_ptr<StateStore> nvme_state(const ZeroLayout& layout, bool masters, const NvmeStateOptions& options) {
  return std::make_unique<NvmeState>(layout, masters, options);
}

}  // namespace trident::parallel::zero
