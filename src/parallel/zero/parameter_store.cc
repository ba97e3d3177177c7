#include "parallel/zero/parameter_store.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/factory.h"
#include "offload/nvme_file.h"
#include "parallel/zero/nvme_staging.h"

namespace trident::parallel::zero {
namespace {

class MemoryParameters final : public ParameterStore {
 public:
  MemoryParameters(const ZeroLayout& layout, DType compute)
      : layout_(layout), shard_(zeros_in(MemoryCategory::kParameter, layout.shard_total(), compute, layout.device())) {}
  Tensor acquire(size_t u) override { return layout_.shard_of(shard_, layout_.buckets()[u]); }
  Tensor to_write(size_t u) override { return acquire(u); }

 private:
  const ZeroLayout& layout_;
  const Tensor shard_;  // concatenated shards, bucket b's at b.begin / N
};

// See Note [The parameter tier's pipeline].
class NvmeParameters final : public ParameterStore {
 public:
  NvmeParameters(const ZeroLayout& layout, DType compute, const NvmeParamOptions& options)
      : layout_(layout), compute_(compute), depth_(options.prefetch_depth) {
    TRI_CHECK(options.prefetch_depth >= 0, "parallel.nvme_prefetch_depth = ", options.prefetch_depth, " (at least 0)");
    int64_t offset = 0;
    for (const Bucket& b : layout.buckets()) {
      region_.push_back(offset);
      bytes_.push_back(offload::nvme_aligned(layout.shard_len(b) * static_cast<int64_t>(element_size(compute))));
      offset += bytes_.back();
      if (bytes_.back() > 0) plan_.push_back(region_.size() - 1);  // the forward's order until one is recorded
    }
    file_ = create_tier_file(options.dir, "parameters", offset, options.queue_depth);
  }
  ~NvmeParameters() override {
    for (auto& [u, slot] : slots_) {
      try {
        settle(slot);
      } catch (...) {  // destructors must not throw; the tier is scratch
      }
    }
  }

  Tensor acquire(size_t u) override {
    if (bytes_[u] == 0) return empty_shard();
    recorded_.push_back(u);
    advance(u);
    Slot& slot = find_or_take(u);
    ++slot.holders;
    read_window();  // queued behind u's read, so the disk works on them while we wait
    try {
      settle(slot);
    } catch (...) {
      slots_.erase(u);  // its bytes are not the part's
      throw;
    }
    return view(u, slot);
  }

  void release(size_t u) override {
    const auto it = slots_.find(u);
    if (it == slots_.end()) return;
    Slot& slot = it->second;
    TRI_ASSERT(slot.holders > 0, "the parameter tier: releasing part ", u, ", which is not acquired");
    if (--slot.holders == 0 && !slot.write && !wanted(u)) slots_.erase(it);
  }

  Tensor to_write(size_t u) override {
    if (bytes_[u] == 0) return empty_shard();
    auto it = slots_.find(u);
    if (it != slots_.end() && it->second.writing) return view(u, it->second);
    Slot* slot = nullptr;
    if (it != slots_.end()) {
      TRI_ASSERT(it->second.holders == 0, "the parameter tier: writing part ", u, " while it is gathered");
      slot = &it->second;
      settle(*slot);  // no transfer may touch the buffer while it changes
    } else {
      slot = take(u, true, false);
    }
    fill_(slot->data, 0.0);  // the region's padding is written too
    slot->writing = true;
    slot->used = ++clock_;
    return view(u, *slot);
  }

  void written(size_t u) override {
    const auto it = slots_.find(u);
    if (it == slots_.end() || !it->second.writing) return;  // nothing handed out (no segment here): unchanged
    Slot& slot = it->second;
    slot.writing = false;
    slot.write = file_->write(region_[u], slot.data.raw_data(), bytes_[u]);
  }

  void begin_forward(bool training) override {
    restart();
    training_ = training;
  }

  void read_ahead() override { restart(); }

  const offload::NvmeFile* file() const override { return file_.get(); }

 private:
  struct Slot {
    explicit Slot(Tensor d) : data(std::move(d)) {}
    Tensor data;                          // the part's region: its shard, then the alignment's zeros
    int holders = 0;                      // acquired for a gather, not yet released
    bool writing = false;                 // handed out by to_write, not yet written
    std::optional<int64_t> read, write;   // tickets in flight
    uint64_t used = 0;                    // for least-recently-used eviction
  };

  Tensor empty_shard() const { return zeros_in(MemoryCategory::kParameter, 0, compute_, Device::cpu()); }
  Tensor view(size_t u, const Slot& slot) const {
    return flat_slice(slot.data, 0, layout_.shard_len(layout_.buckets()[u]));
  }

  // The plan's entries after the last acquisition: a pass that strays from it reads on demand
  // until the next begins.
  void advance(size_t u) {
    if (lost_) return;
    const auto it = std::find(plan_.begin() + static_cast<std::ptrdiff_t>(next_), plan_.end(), u);
    lost_ = it == plan_.end();
    if (!lost_) next_ = static_cast<size_t>(it - plan_.begin()) + 1;
  }
  size_t window_end() const { return lost_ ? next_ : std::min(plan_.size(), next_ + static_cast<size_t>(depth_)); }
  bool wanted(size_t u) const {
    const auto first = plan_.begin() + static_cast<std::ptrdiff_t>(next_);
    const auto last = plan_.begin() + static_cast<std::ptrdiff_t>(window_end());
    return std::find(first, last, u) != last;
  }

  // A pass ends: a training micro-batch's acquisitions become the plan; the next pass starts at
  // its beginning, whose first parts are read now.
  void restart() {
    if (training_ && !recorded_.empty()) plan_ = recorded_;
    recorded_.clear();
    training_ = false;
    next_ = 0;
    lost_ = false;
    read_window();
  }

  // Starts reading the window's parts that are not at hand, while buffers allow.
  void read_window() {
    for (size_t p = next_; p < window_end(); ++p) {
      const size_t u = plan_[p];
      const auto it = slots_.find(u);
      if (it != slots_.end()) {
        it->second.used = ++clock_;
        continue;
      }
      if (take(u, false) == nullptr) return;
    }
  }

  Slot& find_or_take(size_t u) {
    const auto it = slots_.find(u);
    if (it != slots_.end()) {
      it->second.used = ++clock_;
      return it->second;
    }
    return *take(u, true);
  }

  // A new buffer for part u, its region's read started when `read`: a free place while there
  // are fewer than prefetch_depth + 1 buffers, else that of the least recently used buffer that
  // is neither held nor being filled (when `demand`, one the window wants if nothing else; never
  // one held: then one more buffer), its transfers waited for. Null when not `demand` and none
  // fits.
  Slot* take(size_t u, bool demand, bool read = true) {
    if (slots_.size() >= static_cast<size_t>(depth_) + 1) {
      auto victim = slots_.end();
      bool victim_wanted = true;
      for (auto it = slots_.begin(); it != slots_.end(); ++it) {
        const Slot& s = it->second;
        if (s.holders > 0 || s.writing) continue;
        const bool w = wanted(it->first);
        if (w && !demand) continue;
        if (victim == slots_.end() || (victim_wanted && !w) ||
            (victim_wanted == w && s.used < victim->second.used)) {
          victim = it;
          victim_wanted = w;
        }
      }
      if (victim == slots_.end() && !demand) return nullptr;
      if (victim != slots_.end()) {
        settle(victim->second);
        slots_.erase(victim);
      }
    }
    Slot slot(aligned_staging(MemoryCategory::kParameter, bytes_[u], compute_));
    slot.used = ++clock_;
    if (read) slot.read = file_->read(region_[u], slot.data.raw_data(), bytes_[u]);
    return &slots_.emplace(u, std::move(slot)).first->second;
  }

  // Waits for the slot's transfers (a read's bytes are checked against what was written).
  void settle(Slot& slot) {
    if (slot.read) file_->wait(*std::exchange(slot.read, std::nullopt));
    if (slot.write) file_->wait(*std::exchange(slot.write, std::nullopt));
  }

  const ZeroLayout& layout_;
  const DType compute_;
  const int depth_;
  std::vector<int64_t> region_, bytes_;  // bucket -> offset and length in the file
  std::map<size_t, Slot> slots_;         // by bucket
  uint64_t clock_ = 0;
  std::vector<size_t> plan_;      // the acquisitions of the last training micro-batch
  std::vector<size_t> recorded_;  // this pass's so far
  bool training_ = false;         // this pass's order becomes the plan
  size_t next_ = 0;               // the plan's entry after the last acquisition
  bool lost_ = false;             // this pass left the plan
  std::unique_ptr<offload::NvmeFile> file_;
};

}  // namespace

std::unique_ptr<ParameterStore> memory_parameters(const ZeroLayout& layout, DType compute) {
  return std::make_unique<MemoryParameters>(layout, compute);
}

std::unique_ptr<ParameterStore> nvme_parameters(const ZeroLayout& layout, DType compute,
                                                const NvmeParamOptions& options) {
  return std::make_unique<NvmeParameters>(layout, compute, options);
}

}  // namespace trident::parallel::zero
