#include "parallel/zero.h"

#include <algorithm>
#include <cmath>

#include "autograd/engine.h"
#include "core/allocator.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/views.h"
#include "ops/elementwise.h"
#include "ops/optim.h"
#include "parallel/buckets.h"

namespace trident::parallel {
namespace {

Tensor flat_slice(const Tensor& flat, int64_t begin, int64_t length) { return views::narrow(flat, 0, begin, length); }

}  // namespace

ZeroOptimizer::ZeroOptimizer(const std::vector<nn::NamedTensor>& params, comm::Communicator& comm, int stage,
                             int64_t bucket_bytes, const optim::AdamWOptions& options)
    : comm_(comm), stage_(stage), options_(options), alive_(std::make_shared<bool>(true)) {
  TRI_CHECK(stage == 1 || stage == 2, "ZeroOptimizer: stage must be 1 or 2, got ", stage);
  const int64_t N = comm_.size();
  for (const auto& [name, p] : params) {
    TRI_CHECK(p.dtype() == DType::kF32 && p.is_contiguous(), "ZeRO: parameter '", name,
              "' must be a contiguous f32 tensor, got ", p.dtype(), " ", p.shape());
    names_.push_back(name);
    params_.push_back(p);
  }
  // Buckets as data parallelism's, each padded to a multiple of N, laid out back to back.
  const int64_t limit = std::max<int64_t>(1, bucket_bytes / static_cast<int64_t>(sizeof(float)));
  flat_offset_.resize(params_.size());
  bucket_of_.resize(params_.size());
  int64_t total = 0;
  for (const std::vector<size_t>& group : group_in_buckets(params_, limit)) {
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

  // The flat parameters; the model's parameters become views of it (same values everywhere).
  {
    MemoryCategoryGuard guard(MemoryCategory::kParameter);
    flat_params_ = zeros({total});
  }
  for (size_t k = 0; k < params_.size(); ++k) {
    const Tensor view = views::view(flat_slice(*flat_params_, flat_offset_[k], params_[k].numel()),
                                    params_[k].shape().span());
    core::copy_(view, params_[k]);
    params_[k].set_data(view);
  }
  comm_.broadcast(*flat_params_, 0);
  {
    MemoryCategoryGuard guard(MemoryCategory::kGradient);
    if (stage_ == 1) flat_grads_ = zeros({total});
    else grad_shard_ = zeros({total / N});
  }
  {
    MemoryCategoryGuard guard(MemoryCategory::kOptimizerState);
    m_ = zeros({total / N});
    v_ = zeros({total / N});
  }
  // This rank's segments of each bucket.
  for (Bucket& b : buckets_) {
    const int64_t s0 = shard_begin(b), s1 = s0 + shard_len(b);
    for (size_t k : b.params) {
      const int64_t p0 = flat_offset_[k], p1 = p0 + params_[k].numel();
      const int64_t lo = std::max(s0, p0), hi = std::min(s1, p1);
      if (lo < hi) b.mine.push_back({k, lo, lo - p0, hi - lo});
    }
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
  for (Bucket& b : buckets_) b.work.reset();
}

void ZeroOptimizer::begin_backward(bool last_micro_batch) { last_micro_batch_ = last_micro_batch; }

Tensor ZeroOptimizer::grad_slot(size_t k) {
  Bucket& b = buckets_[bucket_of_[k]];
  if (stage_ == 1) return flat_slice(*flat_grads_, flat_offset_[k], params_[k].numel());
  if (!b.staging) {
    MemoryCategoryGuard guard(MemoryCategory::kGradient);
    b.staging = zeros({b.length});
  }
  return flat_slice(*b.staging, flat_offset_[k] - b.begin, params_[k].numel());
}

void ZeroOptimizer::on_grad_ready(size_t k) {
  Tensor p = params_[k];
  const Tensor g = views::view(*p.grad(), {p.numel()});
  Bucket& b = buckets_[bucket_of_[k]];
  const Tensor slot = grad_slot(k);
  // Stage 1 accumulates over the step's micro-batches; stage 2's staging is per micro-batch.
  if (arrived_[k]) {
    ops::add_(slot, g);
  } else {
    core::copy_(slot, g);
  }
  arrived_[k] = true;
  p.zero_grad();  // folded into the flat buffers
  if ((stage_ == 2 || last_micro_batch_) && --b.pending == 0) launch(b);
  for (Bucket& other : buckets_)  // drive MPI's progress on what is in flight
    if (other.work) other.work->test();
}

void ZeroOptimizer::launch(Bucket& b) {
  const int64_t n = shard_len(b);
  if (stage_ == 1) {
    const Tensor bucket = flat_slice(*flat_grads_, b.begin, b.length);
    b.work = comm_.reduce_scatter_async(bucket, flat_slice(bucket, 0, n), comm::ReduceOp::kSum);
  } else {
    b.work = comm_.reduce_scatter_async(*b.staging, flat_slice(*b.staging, 0, n), comm::ReduceOp::kSum);
  }
}

void ZeroOptimizer::end_backward() {
  if (stage_ == 1 && !last_micro_batch_) return;  // stage 1 communicates on the last micro-batch only
  // Buckets with a parameter that got no gradient: zeros for it, then launch in bucket order.
  for (Bucket& b : buckets_) {
    if (b.work) continue;
    for (size_t k : b.params)
      if (!arrived_[k]) fill_(grad_slot(k), 0.0);
    launch(b);
  }
  const double inv = 1.0 / static_cast<double>(comm_.size());
  for (Bucket& b : buckets_) {
    b.work->wait();
    b.work.reset();
    b.pending = static_cast<int>(b.params.size());
    if (stage_ == 2) {
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
    } else {
      ops::scale_(flat_slice(*flat_grads_, b.begin, shard_len(b)), inv);
    }
  }
  if (stage_ == 2) std::fill(arrived_.begin(), arrived_.end(), false);  // staging is per micro-batch
  first_micro_batch_ = false;
}

Tensor ZeroOptimizer::shard_grad(const Bucket& b) const {
  return stage_ == 1 ? flat_slice(*flat_grads_, b.begin, shard_len(b))
                     : flat_slice(*grad_shard_, b.begin / comm_.size(), shard_len(b));
}

Tensor ZeroOptimizer::shard_state(const Tensor& state, const Bucket& b) const {
  return flat_slice(state, b.begin / comm_.size(), shard_len(b));
}

double ZeroOptimizer::clip_grad_norm(double max_norm) {
  std::vector<Tensor> shards;
  for (const Bucket& b : buckets_) shards.push_back(shard_grad(b));
  Tensor sq = full({1}, ops::sum_of_squares(shards), DType::kF64);
  comm_.all_reduce(sq);
  const double norm = std::sqrt(sq.item());
  if (max_norm > 0.0) {
    const double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0)
      for (const Tensor& g : shards) ops::scale_(g, coef);
  }
  return norm;
}

void ZeroOptimizer::step(double lr) {
  ++step_;
  for (const Bucket& b : buckets_) {
    const Tensor g = shard_grad(b), m = shard_state(*m_, b), v = shard_state(*v_, b);
    const int64_t s0 = shard_begin(b);
    for (const Segment& s : b.mine) {
      const bool decay = params_[s.param].dim() >= 2;
      const int64_t at = s.flat - s0;  // offset inside the shard
      ops::adamw_update_(flat_slice(*flat_params_, s.flat, s.length), flat_slice(g, at, s.length),
                         flat_slice(m, at, s.length), flat_slice(v, at, s.length),
                         {lr, options_.beta1, options_.beta2, options_.eps, decay ? options_.weight_decay : 0.0, step_});
    }
  }
  // Everyone's updated shards, in place into the flat parameters.
  std::vector<std::unique_ptr<comm::Work>> gathers;
  for (const Bucket& b : buckets_)
    gathers.push_back(comm_.all_gather_async(flat_slice(*flat_params_, shard_begin(b), shard_len(b)),
                                             flat_slice(*flat_params_, b.begin, b.length)));
  for (auto& w : gathers) w->wait();
  std::fill(arrived_.begin(), arrived_.end(), false);
  first_micro_batch_ = true;
}

std::vector<nn::NamedTensor> ZeroOptimizer::gather_state() {
  std::vector<nn::NamedTensor> out;
  const int64_t total = flat_params_->numel();
  for (const Tensor* state : {&*m_, &*v_}) {
    Tensor full_state = zeros({total});
    for (const Bucket& b : buckets_)
      comm_.all_gather(shard_state(*state, b), flat_slice(full_state, b.begin, b.length));
    const char* suffix = state == &*m_ ? ".exp_avg" : ".exp_avg_sq";
    for (size_t k = 0; k < params_.size(); ++k)
      out.emplace_back(names_[k] + suffix,
                       core::clone(views::view(flat_slice(full_state, flat_offset_[k], params_[k].numel()),
                                               params_[k].shape().span())));
  }
  return out;
}

void ZeroOptimizer::load_state(const std::vector<nn::NamedTensor>& state, int64_t step) {
  for (size_t k = 0; k < params_.size(); ++k) {
    for (int which = 0; which < 2; ++which) {
      const std::string name = names_[k] + (which == 0 ? ".exp_avg" : ".exp_avg_sq");
      const auto it = std::find_if(state.begin(), state.end(), [&](const nn::NamedTensor& t) { return t.first == name; });
      if (it == state.end()) {
        TRI_CHECK(step == 0, "ZeRO: optimizer state has no '", name, "' at step ", step);
        continue;
      }
      TRI_CHECK(it->second.shape() == params_[k].shape(), "ZeRO: optimizer state '", name, "' has shape ",
                it->second.shape(), "; the parameter has ", params_[k].shape());
      const Tensor src = views::view(core::contiguous(core::cast(it->second, DType::kF32)), {params_[k].numel()});
      const Bucket& b = buckets_[bucket_of_[k]];
      const Tensor dst = shard_state(which == 0 ? *m_ : *v_, b);
      for (const Segment& s : b.mine)
        if (s.param == k) core::copy_(flat_slice(dst, s.flat - shard_begin(b), s.length), flat_slice(src, s.in_param, s.length));
    }
  }
  step_ = step;
}

}  // namespace trident::parallel
