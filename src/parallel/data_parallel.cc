#include "parallel/data_parallel.h"

#include "autograd/engine.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/profiler.h"
#include "core/views.h"
#include "parallel/buckets.h"

namespace trident::parallel {

DataParallel::DataParallel(const std::vector<nn::NamedTensor>& params, comm::Communicator& comm,
                           int64_t bucket_bytes, bool overlap, std::unique_ptr<GradReducer> reducer)
    : comm_(comm), reducer_(reducer ? std::move(reducer) : mean_reducer(comm)), overlap_(overlap),
      alive_(std::make_shared<bool>(true)) {
  for (const auto& [name, p] : params) {
    TRI_CHECK(p.dtype() == DType::kF32 && p.is_contiguous(), "data parallel: parameter '", name,
              "' must be a contiguous f32 tensor, got ", p.dtype(), " ", p.shape());
    TRI_CHECK(params_.empty() || p.device() == params_.front().device(), "data parallel: parameter '", name,
              "' is on ", p.device(), ", the others on ", params_.front().device(), "; move the model to one device");
    params_.push_back(p);
  }
  // Same starting weights everywhere, whatever each rank initialized or loaded.
  {
    profiler::ProfileScope scope("dp.broadcast", profiler::Phase::kCommunication);
    for (const Tensor& p : params_) comm_.broadcast(p, 0);
  }

  bucket_of_.resize(params_.size());
  offset_of_.resize(params_.size());
  const int64_t limit = std::max<int64_t>(1, bucket_bytes / static_cast<int64_t>(sizeof(float)));
  for (const std::vector<size_t>& group : group_in_buckets(params_, limit)) {
    Bucket b;
    int64_t off = 0;
    for (size_t k : group) {
      b.params.push_back(k);
      b.offsets.push_back(off);
      bucket_of_[k] = buckets_.size();
      offset_of_[k] = off;
      off += params_[k].numel();
    }
    MemoryCategoryGuard grads(MemoryCategory::kGradient);
    b.buffer = zeros({off}, DType::kF32, params_.front().device());  // where the gradients are
    b.pending = static_cast<int>(group.size());
    buckets_.push_back(std::move(b));
  }
  std::vector<BucketLayout> layouts;
  for (const Bucket& b : buckets_) {
    BucketLayout layout;
    for (size_t i = 0; i < b.params.size(); ++i) {
      layout.shapes.push_back(params_[b.params[i]].shape());
      layout.offsets.push_back(b.offsets[i]);
    }
    layout.numel = b.buffer->numel();
    layouts.push_back(std::move(layout));
  }
  reducer_->prepare(layouts);
  if (!overlap_) return;
  std::weak_ptr<bool> alive = alive_;
  for (size_t k = 0; k < params_.size(); ++k)
    autograd::register_grad_ready_hook(params_[k], [this, k, alive](const Tensor&) {
      if (alive.lock()) on_grad_ready(k);
    });
}

DataParallel::~DataParallel() {
  alive_.reset();
  for (Bucket& b : buckets_) b.work.reset();  // waits for anything in flight
}

void DataParallel::on_grad_ready(size_t k) {
  if (!sync_) return;
  // Copying into the bucket, posting its all-reduce and polling: data parallel's time in the backward.
  profiler::ProfileScope scope("dp.all_reduce", profiler::Phase::kCommunication);
  Bucket& b = buckets_[bucket_of_[k]];
  const Tensor& g = *params_[k].grad();
  core::copy_(views::narrow(*b.buffer, 0, offset_of_[k], params_[k].numel()), views::view(g, {g.numel()}));
  if (--b.pending == 0) launch(b);
  // Non-blocking collectives progress inside MPI calls: poll the ones in flight.
  for (Bucket& other : buckets_)
    if (other.work) other.work->test();
}

void DataParallel::launch(Bucket& b) {
  b.work = reducer_->start(static_cast<size_t>(&b - buckets_.data()), *b.buffer);
}

void DataParallel::finish() {
  profiler::ProfileScope scope("dp.all_reduce", profiler::Phase::kCommunication);
  // Buckets with a parameter that got no gradient this step: zeros for it, then launch, in
  // bucket order on every rank.
  // Without hooks, every gradient is copied in here.
  for (Bucket& b : buckets_) {
    if (b.work) continue;
    for (size_t i = 0; i < b.params.size(); ++i) {
      const Tensor& p = params_[b.params[i]];
      const Tensor slot = views::narrow(*b.buffer, 0, b.offsets[i], p.numel());
      if (!p.grad().has_value()) {
        fill_(slot, 0.0);
      } else if (!overlap_) {
        core::copy_(slot, views::view(core::contiguous(*p.grad()), {p.numel()}));
      }
    }
    launch(b);
  }
  for (Bucket& b : buckets_) {
    b.work->wait();  // the reducer leaves the ranks' mean in the bucket
    b.work.reset();
    // The averaged gradients stay in the bucket: .grad becomes a view of it (PyTorch DDP's
    // gradient_as_bucket_view), so a gradient is never held twice.
    for (size_t i = 0; i < b.params.size(); ++i) {
      Tensor p = params_[b.params[i]];
      p.mutable_grad() = views::view(views::narrow(*b.buffer, 0, b.offsets[i], p.numel()), p.shape().span());
    }
    b.pending = static_cast<int>(b.params.size());
  }
}

}  // namespace trident::parallel
