#include "parallel/zero/sharded_parameters.h"

#include "autograd/functions/backward_hook.h"
#include "autograd/grad_mode.h"
#include "core/allocator.h"
#include "core/check.h"
#include "core/copy.h"
#include "core/profiler.h"

namespace trident::parallel::zero {

ShardedParameters::ShardedParameters(const ZeroLayout& layout, comm::Communicator& comm, DType compute,
                                     const TakeValues& take_values, const std::optional<NvmeParamOptions>& nvme)
    : layout_(layout),
      comm_(comm),
      compute_(compute),
      store_(nvme ? nvme_parameters(layout, compute, *nvme) : memory_parameters(layout, compute)),
      parts_(layout.buckets().size()),
      alive_(std::make_shared<bool>(true)) {
  // Each part's parameters become views of the part's own full buffer, filled from rank 0's
  // values; this rank keeps its shard of it, and the buffer is freed until the part runs.
  for (size_t u = 0; u < parts_.size(); ++u) {
    const Bucket& b = layout_.buckets()[u];
    Part& part = parts_[u];
    part.gathered = zeros_in(MemoryCategory::kGatheredParameter, b.length, compute_, layout_.device());
    take_values(b, *part.gathered);
    part.state = Part::State::kGathered;
    const int64_t n = layout_.shard_len(b);
    core::copy_(store_->to_write(u), flat_slice(*part.gathered, layout_.rank() * n, n));
    store_->written(u);
    release(u);
  }
  store_->read_ahead();
}

ShardedParameters::~ShardedParameters() {
  alive_.reset();
  for (Part& part : parts_) part.gather.reset();  // Work's destructor waits: before the buffers go
}

Tensor ShardedParameters::shard(const Bucket& b) { return store_->to_write(layout_.index_of(b)); }

void ShardedParameters::shard_written(const Bucket& b) { store_->written(layout_.index_of(b)); }

void ShardedParameters::stepped() { store_->read_ahead(); }

void ShardedParameters::start_gather(size_t u) {
  Part& part = parts_[u];
  if (part.state != Part::State::kReleased) return;
  const Bucket& b = layout_.buckets()[u];
  if (b.length == 0) {  // a part whose parameters are all frozen: nothing of ZeRO's to gather
    part.state = Part::State::kGathered;
    return;
  }
  const Tensor shard = store_->acquire(u);  // on NVMe: read, or found read ahead
  part.staged = true;
  profiler::ProfileScope scope("zero.all_gather", profiler::Phase::kCommunication);
  part.gathered->impl().storage()->reset_data(device_allocator(layout_.device().type)
                                                  ->allocate(static_cast<size_t>(b.length) * element_size(compute_),
                                                             MemoryCategory::kGatheredParameter));
  if (shard.device() == layout_.device()) {
    part.gather = comm_.all_gather_async(shard, *part.gathered);
  } else {  // Note [The parameter tier behind a device]
    const int64_t n = layout_.shard_len(b);
    const Tensor mine = flat_slice(*part.gathered, layout_.rank() * n, n);
    core::copy_bytes_(mine, shard);  // synchronous, and the saved parameter views' version kept
    part.staged = false;
    store_->release(u);
    part.gather = comm_.all_gather_async(mine, *part.gathered);  // in place
  }
  part.state = Part::State::kGathering;
}

void ShardedParameters::gather_now(size_t u) {
  start_gather(u);
  Part& part = parts_[u];
  if (part.state == Part::State::kGathering) {
    profiler::ProfileScope scope("zero.all_gather", profiler::Phase::kCommunication);
    part.gather->wait();
    part.gather.reset();
    part.state = Part::State::kGathered;
  }
  if (part.staged) {  // the gathered copy is whole: the shard's staging goes
    part.staged = false;
    store_->release(u);
  }
}

void ShardedParameters::release(size_t u) {
  Part& part = parts_[u];
  if (part.state == Part::State::kGathering) gather_now(u);  // never free memory MPI is writing
  part.gathered->impl().storage()->reset_data(DataPtr());
  part.state = Part::State::kReleased;
}

Tensor ShardedParameters::run(size_t part, const nn::PartForward& forward, const Tensor& x) {
  TRI_CHECK(part < parts_.size(), "ZeRO-3: the model ran part ", part, " but listed ", parts_.size(), " parts");
  if (depth_ == 0) {  // a new forward pass
    completed_.clear();
    store_->begin_forward(autograd::GradMode::is_enabled());
  }
  struct Depth {
    int& d;
    explicit Depth(int& depth) : d(depth) { ++d; }
    ~Depth() { --d; }
  } depth(depth_);
  gather_now(part);
  if (part + 1 < parts_.size()) start_gather(part + 1);  // parts are listed in forward order
  Tensor y = forward(x);
  release(part);
  // The part backward reaches after this one: the one whose forward finished just before.
  const std::optional<size_t> next = completed_.empty() ? std::nullopt : std::optional<size_t>(completed_.back());
  completed_.push_back(part);
  if (!autograd::GradMode::is_enabled()) return y;
  std::weak_ptr<bool> alive = alive_;
  return backward_hook(y, [this, alive, part, next] {
    if (!alive.lock()) return;
    gather_now(part);
    if (next) start_gather(*next);
  });
}

void ShardedParameters::load_segment(const Bucket& b, const Segment& s, const std::optional<Tensor>& masters,
                                     const RangeReader& read) {
  const Tensor dst = flat_slice(shard(b), s.flat - layout_.shard_begin(b), s.length);  // written back at shard_written
  if (masters) {
    core::copy_(dst, *masters);
  } else {
    core::copy_(dst, read(layout_.name(s.param), s.in_param, s.in_param + s.length));
  }
}

}  // namespace trident::parallel::zero
