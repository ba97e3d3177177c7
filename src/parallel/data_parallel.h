// Data parallelism (ZeRO stage 0; PyTorch DDP's design): every rank holds the whole model,
// trains on its slice of each global batch, and the ranks average their gradients.
//
// Gradients are grouped in buckets of about `bucket_bytes`, filled in reverse registration
// order (roughly the order backward produces them). A grad-ready hook copies each gradient
// into its bucket as soon as it is final; when a bucket is full its all-reduce starts
// (asynchronously), so communication overlaps the rest of the backward. finish() waits for
// every bucket and makes each .grad a view of its averaged slice. With gradient
// accumulation, only the last micro-batch's backward communicates (set_sync).
//
// How a full bucket becomes the ranks' mean is its GradReducer's (grad_reducer.h): the fp32
// all-reduce by default, bf16 or PowerSGD under parallel.grad_compression.
//
// Every rank launches the buckets in the same order (the backward's order is the same on all
// ranks; buckets whose parameters got no gradient are launched by finish() in bucket order,
// with zeros), so the collectives match.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/options.h"
#include "nn/module.h"
#include "parallel/grad_reducer.h"

namespace trident::parallel {

class DataParallel {
 public:
  // `params`: the model's parameters (f32), identical on every rank after the broadcast this
  // constructor does from rank 0. With `overlap` false no grad-ready hooks are registered and
  // finish() copies every .grad into the buckets itself: for tensors whose gradients autograd
  // does not accumulate (mixed precision's fp32 masters, filled by MasterWeights). `reducer`
  // averages each bucket (null: the fp32 all-reduce).
  DataParallel(const std::vector<nn::NamedTensor>& params, comm::Communicator& comm, int64_t bucket_bytes,
               bool overlap = true, std::unique_ptr<GradReducer> reducer = nullptr);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // Whether the next backward communicates (true for the last micro-batch of a step).
  void set_sync(bool sync) { sync_ = sync; }
  // Waits for every bucket's all-reduce and makes each .grad a view of the ranks' mean.
  void finish();

  int64_t num_buckets() const { return static_cast<int64_t>(buckets_.size()); }
  GradReducer& reducer() { return *reducer_; }

 private:
  struct Bucket {
    std::vector<size_t> params;  // indices into params_
    std::vector<int64_t> offsets;
    std::optional<Tensor> buffer;  // flat f32
    int pending = 0;               // gradients not yet copied in this step
    std::unique_ptr<comm::Work> work;
  };
  void on_grad_ready(size_t param);
  void launch(Bucket& b);

  comm::Communicator& comm_;
  std::unique_ptr<GradReducer> reducer_;
  std::vector<Tensor> params_;
  std::vector<size_t> bucket_of_;   // param -> bucket
  std::vector<int64_t> offset_of_;  // param -> offset in its bucket
  std::vector<Bucket> buckets_;
  bool sync_ = true;
  bool overlap_ = true;
  std::shared_ptr<bool> alive_;     // hooks outlive this object; they check it
};

}  // namespace trident::parallel
