// How data parallelism turns a bucket of this rank's gradients into the ranks' mean: PyTorch
// DDP's communication hook. DataParallel (data_parallel.h) hands each bucket to its reducer
// as soon as the bucket is complete and waits on the returned Work in finish():
//
//   mean_reducer   fp32 all-reduce, then / N (DDP's default allreduce_hook)
//   bf16_reducer   the bucket cast to bf16, all-reduced, cast back, / N (bf16_compress_hook)
//   PowerSgdReducer (powersgd.h)  rank-r factors with error feedback (powerSGD_hook)
//
// parallel.grad_compression picks one (grad_compression.h); 1-bit Adam is an optimizer, not a
// reducer (onebit_adam.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "nn/module.h"
#include "parallel/parallel_options.h"

namespace trident::parallel {

// The parameters' gradients inside a bucket's flat buffer, in bucket order.
struct BucketLayout {
  std::vector<Shape> shapes;
  std::vector<int64_t> offsets;  // elements from the buffer's start
  int64_t numel = 0;             // of the whole buffer
};

class GradReducer {
 public:
  virtual ~GradReducer() = default;
  // The buckets, once, before the first start(): reducers with state per bucket allocate it.
  virtual void prepare(const std::vector<BucketLayout>& buckets) { (void)buckets; }
  // Which optimizer step the next start() calls belong to (PowerSGD starts compressing at one).
  virtual void set_step(int64_t step) { (void)step; }
  // Starts averaging bucket `index`'s flat f32 `buffer` over the ranks, in place; the Work
  // completes it. Every rank starts the buckets in the same order.
  virtual std::unique_ptr<comm::Work> start(size_t index, const Tensor& buffer) = 0;
  // ZeRO-1's form: the ranks' mean of block `rank` of `buffer` (shard.numel() elements a
  // block) into `shard`, which may be the buffer's first block (as a reduce-scatter in place);
  // the rest of the buffer is left undefined. By default start() and a copy of the block;
  // reducers whose collective has a reduce-scatter form override it to send only that.
  virtual std::unique_ptr<comm::Work> start_shard(size_t index, const Tensor& buffer, const Tensor& shard, int rank);
  // State that differs between ranks and must survive a checkpoint (error feedback), under
  // names unique to the reducer; restored by load_state() before the step `step` resumes at.
  virtual std::vector<nn::NamedTensor> state() const { return {}; }
  virtual void load_state(const std::function<Tensor(const std::string&)>& read, int64_t step) {
    (void)read;
    (void)step;
  }
};

std::unique_ptr<GradReducer> mean_reducer(comm::Communicator& comm);
std::unique_ptr<GradReducer> bf16_reducer(comm::Communicator& comm);
// The reducer `options.grad_compression` asks for over `comm` (null: none, or 1-bit Adam's).
std::unique_ptr<GradReducer> reducer_for(const ParallelOptions& options, comm::Communicator& comm);

// A Work that runs `then` once, after `inner` completes (from wait() or a test() that finds
// it done): a reduction's last local step (dividing by N, casting back).
std::unique_ptr<comm::Work> then(std::unique_ptr<comm::Work> inner, std::function<void()> then);

}  // namespace trident::parallel
