#include "parallel/zero.h"

#include <algorithm>
#include <cmath>

#include "autograd/engine.h"
#include "autograd/functions/backward_hook.h"
#include "autograd/grad_mode.h"
#include "core/allocator.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/profiler.h"
#include "core/views.h"
#include "ops/elementwise.h"
#include "ops/optim.h"
#include "parallel/buckets.h"

namespace trident::parallel {
namespace {

Tensor flat_slice(const Tensor& flat, int64_t begin, int64_t length) { return views::narrow(flat, 0, begin, length); }

}  // namespace

ZeroOptimizer::ZeroOptimizer(const std::vector<nn::NamedTensor>& params, comm::Communicator& comm, int stage,
                             int64_t bucket_bytes, const optim::AdamWOptions& options,
                             const std::vector<std::vector<size_t>>& parts, DType compute, bool offload,
                             std::unique_ptr<GradReducer> reducer)
    : comm_(comm),
      stage_(stage),
      options_(options),
      compute_(compute),
      offload_(offload),
      alive_(std::make_shared<bool>(true)),
      reducer_(std::move(reducer)) {
  TRI_CHECK(stage >= 1 && stage <= 3, "ZeroOptimizer: stage must be 1, 2 or 3, got ", stage);
  TRI_CHECK(!reducer_ || stage == 1, "ZeRO-", stage, ": compressed gradients compose with stage 1 only");
  TRI_CHECK(compute == DType::kF32 || compute == DType::kBF16 || compute == DType::kF16,
            "ZeroOptimizer: the compute dtype must be f32, bf16 or f16, got ", compute);
  TRI_CHECK(stage != 3 || !parts.empty(), "ZeRO-3 needs the model's parts (its parameter groups)");
  const int64_t N = comm_.size();
  for (const auto& [name, p] : params) {
    TRI_CHECK(p.dtype() == DType::kF32 && p.is_contiguous(), "ZeRO: parameter '", name,
              "' must be a contiguous f32 tensor, got ", p.dtype(), " ", p.shape());
    TRI_CHECK(params_.empty() || p.device() == params_.front().device(), "ZeRO: parameter '", name, "' is on ",
              p.device(), ", the others on ", params_.front().device(), "; move the model to one device");
    names_.push_back(name);
    params_.push_back(p);
  }
  if (!params_.empty()) device_ = params_.front().device();  // every buffer lives with the parameters,
  state_device_ = offload_ ? Device::cpu() : device_;         // but the optimizer's when offloaded
  // Buckets as data parallelism's, each padded to a multiple of N, laid out back to back.
  const int64_t limit = std::max<int64_t>(1, bucket_bytes / static_cast<int64_t>(sizeof(float)));
  flat_offset_.resize(params_.size());
  bucket_of_.resize(params_.size());
  int64_t total = 0;
  std::vector<std::vector<size_t>> groups = stage_ == 3 ? parts : group_in_buckets(params_, limit);
  if (stage_ == 3) {  // every parameter in exactly one part
    std::vector<int> seen(params_.size(), 0);
    for (const auto& part : parts)
      for (size_t k : part) {
        TRI_CHECK(k < params_.size(), "ZeRO-3: part index ", k, " is out of range (", params_.size(), " parameters)");
        ++seen[k];
      }
    for (size_t k = 0; k < params_.size(); ++k)
      TRI_CHECK(seen[k] == 1, "ZeRO-3: parameter '", names_[k], "' is in ", seen[k], " parts; it must be in exactly one");
  }
  for (const std::vector<size_t>& group : groups) {
    Bucket b;
    b.begin = total;
    int64_t filled = 0;
    for (size_t k : group) {
      flat_offset_[k] = b.begin + filled;
      bucket_of_[k] = buckets_.size();
      filled += params_[k].numel();
    }
    b.params = group;
    b.length = (filled + N - 1) / N * N;
    total += b.length;
    buckets_.push_back(std::move(b));
  }
  if (reducer_) {
    std::vector<BucketLayout> layouts;
    for (const Bucket& b : buckets_) {
      BucketLayout layout;
      for (size_t k : b.params) {
        layout.shapes.push_back(params_[k].shape());
        layout.offsets.push_back(flat_offset_[k] - b.begin);
      }
      layout.numel = b.length;
      layouts.push_back(std::move(layout));
    }
    reducer_->prepare(layouts);
  }

  // Host state for a device model is pinned, so its copies to and from the device run at full speed.
  auto state_buffer = [&](MemoryCategory category) {
    MemoryCategoryGuard guard(category);
    if (state_device_ == device_) return zeros({total / N}, DType::kF32, device_);
    Tensor t = empty_pinned({total / N}, DType::kF32);
    fill_(t, 0.0);
    return t;
  };
  if (has_masters()) master_shard_ = state_buffer(MemoryCategory::kOptimizerState);
  // Rank 0's f32 values of bucket b (laid out as in the flat buffer): this rank's shard of
  // them become its masters, and `into` (the bucket's parameters in the compute dtype) gets
  // them all; the parameters become views of `into`.
  auto take_values = [&](const Bucket& b, const Tensor& into) {
    std::optional<Tensor> values32;
    if (mixed()) {
      MemoryCategoryGuard guard(MemoryCategory::kGatheredParameter);  // transient
      values32 = zeros({b.length}, DType::kF32, device_);
    }
    const Tensor values = values32.value_or(into);
    for (size_t k : b.params) {
      const int64_t at = flat_offset_[k] - b.begin;
      core::copy_(views::view(flat_slice(values, at, params_[k].numel()), params_[k].shape().span()), params_[k]);
      params_[k].set_data(views::view(flat_slice(into, at, params_[k].numel()), params_[k].shape().span()));
    }
    {
      profiler::ProfileScope scope("zero.broadcast", profiler::Phase::kCommunication);
      comm_.broadcast(values, 0);
    }
    if (has_masters()) core::copy_(shard_masters(b), flat_slice(values, comm_.rank() * shard_len(b), shard_len(b)));
    if (mixed()) core::copy_(into, values);  // rounded to the compute dtype
  };
  if (stage_ < 3) {
    // The flat parameters; the model's parameters become views of it (same values everywhere).
    {
      MemoryCategoryGuard guard(MemoryCategory::kParameter);
      flat_params_ = zeros({total}, compute_, device_);
    }
    for (const Bucket& b : buckets_) take_values(b, flat_slice(*flat_params_, b.begin, b.length));
  } else {
    // Each part's parameters become views of the part's own full buffer, filled from rank 0's
    // values; this rank keeps its shard of it, and the buffer is freed until a part runs.
    {
      MemoryCategoryGuard guard(MemoryCategory::kParameter);
      param_shard_ = zeros({total / N}, compute_, device_);
    }
    for (Bucket& b : buckets_) {
      {
        MemoryCategoryGuard guard(MemoryCategory::kGatheredParameter);
        b.gathered = zeros({b.length}, compute_, device_);
      }
      take_values(b, *b.gathered);
      b.state = Bucket::State::kGathered;
      core::copy_(shard_params(b), flat_slice(*b.gathered, comm_.rank() * shard_len(b), shard_len(b)));
      release(static_cast<size_t>(&b - buckets_.data()));
    }
  }
  {
    MemoryCategoryGuard guard(MemoryCategory::kGradient);
    if (stage_ == 1) flat_grads_ = zeros({total}, DType::kF32, device_);
    else grad_shard_ = zeros({total / N}, DType::kF32, device_);
  }
  {
    MemoryCategoryGuard guard(MemoryCategory::kOptimizerState);
    m_ = state_buffer(MemoryCategory::kOptimizerState);
    v_ = state_buffer(MemoryCategory::kOptimizerState);
    if (offload_ && state_device_ != device_) {
      host_grads_ = state_buffer(MemoryCategory::kGradient);
      if (mixed()) host_params_ = empty_pinned({total / N}, compute_);
    }
  }
  // This rank's segments of each bucket.
  for (Bucket& b : buckets_) {
    b.mine = segments_of(b, comm_.rank());
    b.pending = static_cast<int>(b.params.size());
  }
  arrived_.assign(params_.size(), false);
  std::weak_ptr<bool> alive = alive_;
  for (size_t k = 0; k < params_.size(); ++k)
    autograd::register_grad_ready_hook(params_[k], [this, k, alive](const Tensor&) {
      if (alive.lock()) on_grad_ready(k);
    });
}

ZeroOptimizer::~ZeroOptimizer() {
  alive_.reset();
  if (copies_in_flight_) {
    try {
      core::wait_async_copies(device_);
    } catch (...) {  // destructors must not throw; the device's error surfaces on its next use
    }
  }
  for (Bucket& b : buckets_) {
    b.work.reset();
    b.gather.reset();
  }
}

void ZeroOptimizer::start_gather(size_t u) {
  Bucket& b = buckets_[u];
  if (b.state != Bucket::State::kReleased) return;
  profiler::ProfileScope scope("zero.all_gather", profiler::Phase::kCommunication);
  b.gathered->impl().storage()->reset_data(
      device_allocator(device_.type)->allocate(static_cast<size_t>(b.length) * element_size(compute_),
                                               MemoryCategory::kGatheredParameter));
  b.gather = comm_.all_gather_async(shard_params(b), *b.gathered);
  b.state = Bucket::State::kGathering;
}

void ZeroOptimizer::gather_now(size_t u) {
  start_gather(u);
  Bucket& b = buckets_[u];
  if (b.state == Bucket::State::kGathering) {
    profiler::ProfileScope scope("zero.all_gather", profiler::Phase::kCommunication);
    b.gather->wait();
    b.gather.reset();
    b.state = Bucket::State::kGathered;
  }
}

void ZeroOptimizer::release(size_t u) {
  Bucket& b = buckets_[u];
  if (b.state == Bucket::State::kGathering) gather_now(u);  // never free memory MPI is writing
  b.gathered->impl().storage()->reset_data(DataPtr());
  b.state = Bucket::State::kReleased;
}

Tensor ZeroOptimizer::run(size_t part, const nn::PartForward& forward, const Tensor& x) {
  TRI_CHECK(stage_ == 3, "ZeRO stage ", stage_, " does not shard parameters: it has no part hooks");
  TRI_CHECK(part < buckets_.size(), "ZeRO-3: the model ran part ", part, " but listed ", buckets_.size(), " parts");
  if (depth_ == 0) completed_.clear();  // a new forward pass
  struct Depth {
    int& d;
    explicit Depth(int& depth) : d(depth) { ++d; }
    ~Depth() { --d; }
  } depth(depth_);
  gather_now(part);
  if (part + 1 < buckets_.size()) start_gather(part + 1);  // parts are listed in forward order
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

void ZeroOptimizer::begin_backward(bool last_micro_batch) { last_micro_batch_ = last_micro_batch; }

Tensor ZeroOptimizer::grad_slot(size_t k) {
  Bucket& b = buckets_[bucket_of_[k]];
  if (stage_ == 1) return flat_slice(*flat_grads_, flat_offset_[k], params_[k].numel());
  if (!b.staging) {
    MemoryCategoryGuard guard(MemoryCategory::kGradient);
    b.staging = zeros({b.length}, DType::kF32, device_);
  }
  return flat_slice(*b.staging, flat_offset_[k] - b.begin, params_[k].numel());
}

// Note [Staged buckets]
// Stages 2-3 copy each micro-batch's gradients into a full-size f32 staging buffer per bucket
// (allocated at the bucket's first gradient), reduce-scatter it and free it once its shard is
// folded in. Folding in whenever MPI reports a reduce-scatter done made the peak depend on
// MPI's timing (on 2 ranks of the small config, 0 to 14% under the every-bucket bound, by
// run). Instead a bucket is folded in when the next one is posted: the backward has computed a
// whole bucket's gradients since, polling MPI at each, so the wait is rarely a wait; at most
// two buckets are staged besides those still filling (ZeRO-3's root part, open from the
// backward's first gradient to its last), and planner/memory_model.cc predicts the peak
// exactly from the buckets' sizes.
void ZeroOptimizer::on_grad_ready(size_t k) {
  // Folding the gradient into its bucket, posting the bucket's reduce-scatter and polling.
  profiler::ProfileScope scope("zero.reduce_scatter", profiler::Phase::kCommunication);
  Tensor p = params_[k];
  const Tensor g = views::view(*p.grad(), {p.numel()});
  Bucket& b = buckets_[bucket_of_[k]];
  const Tensor slot = grad_slot(k);
  // Stage 1 accumulates over the step's micro-batches; stage 2's staging is per micro-batch.
  // Both are f32, whatever the parameters' dtype (Note [Mixed-dtype add_]: no f32 copy of g).
  if (arrived_[k]) {
    ops::add_(slot, g);
  } else {
    core::copy_(slot, g);
  }
  arrived_[k] = true;
  p.zero_grad();  // folded into the flat buffers
  if ((stage_ >= 2 || last_micro_batch_) && --b.pending == 0) {
    launch(b);
    // Stage 3: every use of the part's parameters has run (each op that reads a parameter
    // also produces its gradient), so the gathered copy can go.
    if (stage_ == 3) release(bucket_of_[k]);
    if (stage_ >= 2) {  // Note [Staged buckets]
      if (posted_) finish_reduce(buckets_[*posted_]);
      posted_ = bucket_of_[k];
    }
  }
  // Drive MPI's progress on what is in flight. Stage 1 folds in what has finished while the
  // backward goes on (under ZeRO-Offload, its copy to the host then overlaps the backward
  // too); stages 2-3 fold in at a fixed point, so that their staged memory is a fixed number.
  for (Bucket& other : buckets_)
    if (other.work && other.work->test() && stage_ == 1) finish_reduce(other);
}

void ZeroOptimizer::add_grad(const std::string& name, const Tensor& grad) {
  const size_t k = static_cast<size_t>(std::find(names_.begin(), names_.end(), name) - names_.begin());
  TRI_CHECK(k < names_.size(), "ZeRO: no parameter named '", name, "'");
  TRI_CHECK(grad.shape() == params_[k].shape(), "ZeRO: gradient ", grad.shape(), " for parameter '", name,
            "' of shape ", params_[k].shape());
  const Tensor slot = grad_slot(k);
  const Tensor g = views::view(core::contiguous(grad), {grad.numel()});  // any dtype (Note [Mixed-dtype add_])
  if (arrived_[k]) {
    ops::add_(slot, g);
  } else {
    core::copy_(slot, g);
  }
  arrived_[k] = true;
}

void ZeroOptimizer::launch(Bucket& b) {
  const int64_t n = shard_len(b);
  // Whether this reduce-scatter completes the step's gradients is decided now: an interleaved
  // pipeline may fold it in during a later chunk's backward, not the last micro-batch's.
  b.final = stage_ == 1 || last_micro_batch_;
  if (stage_ == 1) {
    const Tensor bucket = flat_slice(*flat_grads_, b.begin, b.length);
    if (reducer_)
      b.work = reducer_->start_shard(static_cast<size_t>(&b - buckets_.data()), bucket, flat_slice(bucket, 0, n),
                                     comm_.rank());
    else b.work = comm_.reduce_scatter_async(bucket, flat_slice(bucket, 0, n), comm::ReduceOp::kSum);
  } else {
    b.work = comm_.reduce_scatter_async(*b.staging, flat_slice(*b.staging, 0, n), comm::ReduceOp::kSum);
  }
}

void ZeroOptimizer::finish_reduce(Bucket& b) {
  b.work->wait();
  b.work.reset();
  b.reduced = true;
  const double inv = 1.0 / static_cast<double>(comm_.size());
  if (stage_ >= 2) {
    // Average this micro-batch's shard and add it to the step's gradient shard.
    const Tensor part = flat_slice(*b.staging, 0, shard_len(b));
    ops::scale_(part, inv);
    const Tensor dst = flat_slice(*grad_shard_, b.begin / comm_.size(), shard_len(b));
    if (first_micro_batch_) {
      core::copy_(dst, part);
    } else {
      ops::add_(dst, part);
    }
    b.staging.reset();  // the full bucket exists only while it is being reduced
  } else if (reducer_) {
    // The reducer left this rank's mean where the reduce-scatter would have, the bucket's start.
  } else {
    ops::scale_(flat_slice(*flat_grads_, b.begin, shard_len(b)), inv);
  }
  if (host_grads_ && b.final) {  // on its way to the host's AdamW at once
    core::copy_async_(flat_slice(*host_grads_, b.begin / comm_.size(), shard_len(b)), shard_grad(b));
    copies_in_flight_ = true;
  }
}

void ZeroOptimizer::wait_copies() {
  if (!copies_in_flight_) return;
  core::wait_async_copies(device_);
  copies_in_flight_ = false;
}

void ZeroOptimizer::end_backward() {
  if (stage_ == 1 && !last_micro_batch_) return;  // stage 1 communicates on the last micro-batch only
  profiler::ProfileScope scope("zero.reduce_scatter", profiler::Phase::kCommunication);
  // Buckets with a parameter that got no gradient: zeros for it, then launch in bucket order.
  for (Bucket& b : buckets_) {
    if (b.work || b.reduced) continue;
    for (size_t k : b.params)
      if (!arrived_[k]) fill_(grad_slot(k), 0.0);
    launch(b);
    if (stage_ == 3) release(static_cast<size_t>(&b - buckets_.data()));
  }
  for (Bucket& b : buckets_) {
    if (!b.reduced) finish_reduce(b);
    b.reduced = false;
    b.pending = static_cast<int>(b.params.size());
  }
  posted_.reset();
  if (stage_ >= 2) std::fill(arrived_.begin(), arrived_.end(), false);  // staging is per micro-batch
  first_micro_batch_ = false;
}

Tensor ZeroOptimizer::shard_grad(const Bucket& b) const {
  return stage_ == 1 ? flat_slice(*flat_grads_, b.begin, shard_len(b))
                     : flat_slice(*grad_shard_, b.begin / comm_.size(), shard_len(b));
}

Tensor ZeroOptimizer::shard_params(const Bucket& b) const {
  return stage_ == 3 ? flat_slice(*param_shard_, b.begin / comm_.size(), shard_len(b))
                     : flat_slice(*flat_params_, shard_begin(b), shard_len(b));
}

Tensor ZeroOptimizer::shard_masters(const Bucket& b) const {
  return has_masters() ? flat_slice(*master_shard_, b.begin / comm_.size(), shard_len(b)) : shard_params(b);
}

Tensor ZeroOptimizer::shard_state(const Tensor& state, const Bucket& b) const {
  return flat_slice(state, b.begin / comm_.size(), shard_len(b));
}

double ZeroOptimizer::clip_grad_norm(double max_norm, double grad_scale) {
  profiler::ProfileScope scope("clip_grad_norm", profiler::Phase::kOptimizer);
  std::vector<Tensor> shards;
  for (const Bucket& b : buckets_) shards.push_back(shard_grad(b));
  double norm = 0.0;
  if (tp_ == nullptr && pp_ == nullptr) {
    Tensor sq = full({1}, ops::sum_of_squares(shards), DType::kF64);
    profiler::ProfileScope comm_scope("zero.all_reduce", profiler::Phase::kCommunication);
    comm_.all_reduce(sq);
    norm = std::sqrt(sq.item());
  } else {
    // Squares of split and of replicated parameters apart: the first sum over tp too; then
    // both over the pipeline's stages.
    std::vector<Tensor> split, replicated;
    for (const Bucket& b : buckets_)
      for (const Segment& s : b.mine)
        (split_[s.param] ? split : replicated).push_back(flat_slice(shard_grad(b), s.flat - shard_begin(b), s.length));
    Tensor sq = from_vector(std::vector<double>{ops::sum_of_squares(split), ops::sum_of_squares(replicated)}, Shape{2});
    profiler::ProfileScope comm_scope("zero.all_reduce", profiler::Phase::kCommunication);
    comm_.all_reduce(sq);
    if (tp_ != nullptr) {
      Tensor split_sq = views::narrow(sq, 0, 0, 1);
      tp_->all_reduce(split_sq);
    }
    if (pp_ != nullptr) pp_->all_reduce(sq);
    const std::vector<double> v = to_vector<double>(sq);
    norm = std::sqrt(v[0] + v[1]);
  }
  if (!std::isfinite(norm)) return norm;  // overflowed: the caller skips the step
  norm /= grad_scale;
  double factor = 1.0 / grad_scale;
  if (max_norm > 0.0) {
    const double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0) factor *= coef;
  }
  if (factor != 1.0) {
    if (host_grads_) {  // ZeRO-Offload: AdamW reads the host's copies
      wait_copies();
      ops::scale_(*host_grads_, factor);
    } else {
      for (const Tensor& g : shards) ops::scale_(g, factor);
    }
  }
  return norm;
}

void ZeroOptimizer::step(double lr) {
  profiler::ProfileScope scope("zero.step", profiler::Phase::kOptimizer);
  ++step_;
  wait_copies();  // ZeRO-Offload: the averaged gradient shards, on the host
  const auto step_grad = [&](const Bucket& b) {
    return host_grads_ ? flat_slice(*host_grads_, b.begin / comm_.size(), shard_len(b)) : shard_grad(b);
  };
  // AdamW on these buckets' segments of this rank's shard, with and without weight decay:
  // two multi-tensor updates.
  const auto adamw = [&](const std::vector<const Bucket*>& group) {
    for (const bool decay : {true, false}) {
      std::vector<Tensor> w, g, m, v;
      for (const Bucket* b : group) {
        const int64_t s0 = shard_begin(*b);
        for (const Segment& s : b->mine) {
          if ((params_[s.param].dim() >= 2) != decay) continue;
          const int64_t at = s.flat - s0;  // offset inside the shard
          w.push_back(flat_slice(shard_masters(*b), at, s.length));
          g.push_back(flat_slice(step_grad(*b), at, s.length));
          m.push_back(flat_slice(shard_state(*m_, *b), at, s.length));
          v.push_back(flat_slice(shard_state(*v_, *b), at, s.length));
        }
      }
      ops::adamw_update_multi_(w, g, m, v,
                               {lr, options_.beta1, options_.beta2, options_.eps,
                                decay ? options_.weight_decay : 0.0, step_});
    }
  };
  if (host_grads_) {
    // ZeRO-Offload: bucket by bucket, so each bucket's updated parameters travel back to the
    // device (rounded on the host first under mixed precision) while the host steps the next.
    for (const Bucket& b : buckets_) {
      adamw({&b});
      const Tensor masters = shard_masters(b);
      copies_in_flight_ = true;
      if (host_params_) {
        const Tensor rounded = flat_slice(*host_params_, b.begin / comm_.size(), shard_len(b));
        core::copy_(rounded, masters);
        core::copy_async_(shard_params(b), rounded);
      } else {
        core::copy_async_(shard_params(b), masters);
      }
    }
    wait_copies();
  } else {
    std::vector<const Bucket*> all;
    for (const Bucket& b : buckets_) all.push_back(&b);
    adamw(all);
    if (has_masters())  // the updated masters (rounded) into this rank's shard of the parameters
      for (const Bucket& b : buckets_) core::copy_(shard_params(b), shard_masters(b));
  }
  // Stages 1-2: everyone's updated shards, in place into the flat parameters. (Stage 3
  // gathers them when the next forward needs them.)
  profiler::ProfileScope gather_scope("zero.all_gather", profiler::Phase::kCommunication);
  std::vector<std::unique_ptr<comm::Work>> gathers;
  for (const Bucket& b : buckets_)
    if (stage_ < 3)
    gathers.push_back(comm_.all_gather_async(flat_slice(*flat_params_, shard_begin(b), shard_len(b)),
                                             flat_slice(*flat_params_, b.begin, b.length)));
  for (auto& w : gathers) w->wait();
  skip_step();
}

void ZeroOptimizer::skip_step() {
  wait_copies();  // the next backward overwrites the shards they read
  std::fill(arrived_.begin(), arrived_.end(), false);
  first_micro_batch_ = true;
}

std::vector<nn::NamedTensor> ZeroOptimizer::gather(const std::function<Tensor(const Bucket&)>& shard_of,
                                                   const std::string& suffix) {
  const int64_t total = buckets_.back().begin + buckets_.back().length;
  Tensor whole = zeros({total}, DType::kF32, shard_of(buckets_.front()).device());
  for (const Bucket& b : buckets_) comm_.all_gather(shard_of(b), flat_slice(whole, b.begin, b.length));
  std::vector<nn::NamedTensor> out;
  for (size_t k = 0; k < params_.size(); ++k)
    out.emplace_back(names_[k] + suffix, core::clone(views::view(flat_slice(whole, flat_offset_[k], params_[k].numel()),
                                                                 params_[k].shape().span())));
  return out;
}

std::vector<nn::NamedTensor> ZeroOptimizer::gather_state() {
  std::vector<nn::NamedTensor> out = gather([&](const Bucket& b) { return shard_state(*m_, b); }, ".exp_avg");
  std::vector<nn::NamedTensor> v = gather([&](const Bucket& b) { return shard_state(*v_, b); }, ".exp_avg_sq");
  out.insert(out.end(), v.begin(), v.end());
  return out;
}

std::vector<nn::NamedTensor> ZeroOptimizer::gather_masters() {
  return gather([&](const Bucket& b) { return shard_masters(b); }, "");
}

std::vector<ZeroOptimizer::Segment> ZeroOptimizer::segments_of(const Bucket& b, int rank) const {
  std::vector<Segment> out;
  const int64_t s0 = b.begin + rank * shard_len(b), s1 = s0 + shard_len(b);
  for (size_t k : b.params) {
    const int64_t p0 = flat_offset_[k], p1 = p0 + params_[k].numel();
    const int64_t lo = std::max(s0, p0), hi = std::min(s1, p1);
    if (lo < hi) out.push_back({k, lo, lo - p0, hi - lo});
  }
  return out;
}

std::vector<ZeroOptimizer::Piece> ZeroOptimizer::pieces_of(int rank) const {
  std::vector<Piece> out;
  for (const char* suffix : {"", ".exp_avg", ".exp_avg_sq"})
    for (const Bucket& b : buckets_)
      for (const Segment& s : segments_of(b, rank))
        out.push_back({names_[s.param] + suffix, params_[s.param].shape(), s.in_param, s.in_param + s.length, {}});
  return out;
}

std::vector<ZeroOptimizer::Piece> ZeroOptimizer::pieces() {
  std::vector<Piece> out = pieces_of(comm_.rank());
  size_t i = 0;
  const std::optional<Tensor>* states[] = {nullptr, &m_, &v_};  // parameters, then AdamW's m and v
  for (const std::optional<Tensor>* state : states)
    for (const Bucket& b : buckets_) {
      const Tensor shard = state ? shard_state(**state, b) : shard_masters(b);
      for (const Segment& s : b.mine) out[i++].values = flat_slice(shard, s.flat - shard_begin(b), s.length);
    }
  TRI_ASSERT(i == out.size(), "ZeRO: pieces and segments disagree");
  return out;
}

void ZeroOptimizer::load(const RangeReader& read, bool with_state, int64_t step) {
  for (const Bucket& b : buckets_) {
    for (size_t k : b.params) {
      if (stage_ < 3) {  // every rank holds the whole parameter (rounded, under mixed precision)
        core::copy_(views::view(params_[k], {params_[k].numel()}), read(names_[k], 0, params_[k].numel()));
      }
    }
    for (const Segment& s : b.mine) {
      const int64_t at = s.flat - shard_begin(b);
      if (stage_ == 3 || has_masters())
        core::copy_(flat_slice(shard_masters(b), at, s.length), read(names_[s.param], s.in_param, s.in_param + s.length));
      if (stage_ == 3 && has_masters())
        core::copy_(flat_slice(shard_params(b), at, s.length), flat_slice(shard_masters(b), at, s.length));
      if (!with_state) continue;
      core::copy_(flat_slice(shard_state(*m_, b), at, s.length),
                  read(names_[s.param] + ".exp_avg", s.in_param, s.in_param + s.length));
      core::copy_(flat_slice(shard_state(*v_, b), at, s.length),
                  read(names_[s.param] + ".exp_avg_sq", s.in_param, s.in_param + s.length));
    }
  }
  step_ = step;
}

}  // namespace trident::parallel
