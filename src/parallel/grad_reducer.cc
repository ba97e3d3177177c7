#include "parallel/grad_reducer.h"

#include "core/copy.h"
#include "core/views.h"
#include "ops/optim.h"
#include "parallel/powersgd.h"

namespace trident::parallel {
namespace {

class ThenWork final : public comm::Work {
 public:
  ThenWork(std::unique_ptr<comm::Work> inner, std::function<void()> then)
      : inner_(std::move(inner)), then_(std::move(then)) {}
  void wait() override {
    if (done_) return;
    inner_->wait();
    finish();
  }
  bool test() override {
    if (!done_ && inner_->test()) {
      inner_->wait();  // returns at once; a staged Work copies its result back only here
      finish();
    }
    return done_;
  }

 private:
  void finish() {
    done_ = true;
    then_();
  }
  std::unique_ptr<comm::Work> inner_;
  std::function<void()> then_;
  bool done_ = false;
};

class MeanReducer final : public GradReducer {
 public:
  explicit MeanReducer(comm::Communicator& comm) : comm_(comm) {}
  std::unique_ptr<comm::Work> start(size_t, const Tensor& buffer) override {
    const double inv = 1.0 / static_cast<double>(comm_.size());
    return then(comm_.all_reduce_async(buffer, comm::ReduceOp::kSum), [buffer, inv] { ops::scale_(buffer, inv); });
  }

 private:
  comm::Communicator& comm_;
};

// Half the bytes of fp32; each addition of the reduction rounds to bf16 (8 bits of
// mantissa), as NCCL's and Gloo's bf16 all-reduce that bf16_compress_hook runs on.
class Bf16Reducer final : public GradReducer {
 public:
  explicit Bf16Reducer(comm::Communicator& comm) : comm_(comm) {}
  // A bf16 reduce-scatter: (N - 1) / N of the bucket's bf16 bytes on the wire, where the
  // all-reduce and a copy would send twice that, as much as fp32's reduce-scatter.
  std::unique_ptr<comm::Work> start_shard(size_t, const Tensor& buffer, const Tensor& shard, int) override {
    const Tensor half = core::cast(buffer, DType::kBF16);
    const Tensor mine = views::narrow(views::view(half, {half.numel()}), 0, 0, shard.numel());
    const double inv = 1.0 / static_cast<double>(comm_.size());
    return then(comm_.reduce_scatter_async(half, mine, comm::ReduceOp::kSum), [shard, half, mine, inv] {
      core::copy_(shard, mine);
      ops::scale_(shard, inv);
    });
  }
  std::unique_ptr<comm::Work> start(size_t, const Tensor& buffer) override {
    const Tensor half = core::cast(buffer, DType::kBF16);
    const double inv = 1.0 / static_cast<double>(comm_.size());
    return then(comm_.all_reduce_async(half, comm::ReduceOp::kSum), [buffer, half, inv] {
      core::copy_(buffer, half);
      ops::scale_(buffer, inv);
    });
  }

 private:
  comm::Communicator& comm_;
};

}  // namespace

std::unique_ptr<comm::Work> GradReducer::start_shard(size_t index, const Tensor& buffer, const Tensor& shard, int rank) {
  const int64_t n = shard.numel();
  return then(start(index, buffer), [buffer, shard, rank, n] {
    const Tensor block = views::narrow(views::view(buffer, {buffer.numel()}), 0, rank * n, n);
    if (block.raw_data() != shard.raw_data()) core::copy_(shard, block);
  });
}

std::unique_ptr<comm::Work> then(std::unique_ptr<comm::Work> inner, std::function<void()> then) {
  return std::make_unique<ThenWork>(std::move(inner), std::move(then));
}

std::unique_ptr<GradReducer> mean_reducer(comm::Communicator& comm) { return std::make_unique<MeanReducer>(comm); }
std::unique_ptr<GradReducer> bf16_reducer(comm::Communicator& comm) { return std::make_unique<Bf16Reducer>(comm); }

std::unique_ptr<GradReducer> reducer_for(const ParallelOptions& options, comm::Communicator& comm) {
  if (options.grad_compression == "bf16") return bf16_reducer(comm);
  if (options.grad_compression == "powersgd")
    return std::make_unique<PowerSgdReducer>(comm, options.powersgd_rank, options.powersgd_start_step);
  return nullptr;
}

}  // namespace trident::parallel
