// ZeRO stages 1 and 2 (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training
// Trillion Parameter Models", 2020) for fp32 AdamW, as DeepSpeed implements them.
//
// Layout: the parameters become views of one flat fp32 buffer (Tensor::set_data), in buckets
// of about bucket_bytes in reverse registration order (the backward's), each padded to a
// multiple of the rank count N. Rank k owns the k-th 1/N of every bucket: its optimizer state
// (m, v) covers only those elements (8P/N bytes), and it updates only them.
//   stage 1  gradients accumulate (all micro-batches) in a full flat fp32 buffer (4P); on the
//            last micro-batch each bucket is reduce-scattered in place as soon as it is
//            complete. Model states: 4P params + 4P grads + 8P/N optimizer = 8P + 8P/N.
//   stage 2  each bucket's gradients are gathered in a transient buffer, reduce-scattered as
//            soon as it is complete (every micro-batch), and added into this rank's
//            persistent gradient shard (4P/N): 4P + 12P/N.
// After AdamW on the shard, every bucket is all-gathered in place, so all ranks hold the full
// updated parameters. Per step each rank hands P elements to reduce-scatters and P to
// all-gathers. The global gradient norm for clipping is an all-reduce of the shards' sums of
// squares. Parameters' .grad is dropped as soon as it is folded into the flat buffers.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "comm/communicator.h"
#include "nn/module.h"
#include "optim/adamw.h"

namespace trident::parallel {

class ZeroOptimizer {
 public:
  // `params`: the model's f32 parameters (broadcast from rank 0 here).
  ZeroOptimizer(const std::vector<nn::NamedTensor>& params, comm::Communicator& comm, int stage,
                int64_t bucket_bytes, const optim::AdamWOptions& options);
  ~ZeroOptimizer();
  ZeroOptimizer(const ZeroOptimizer&) = delete;
  ZeroOptimizer& operator=(const ZeroOptimizer&) = delete;

  // Before each micro-batch's backward: whether it is the step's last.
  void begin_backward(bool last_micro_batch);
  // After each micro-batch's backward: completes that backward's communication.
  void end_backward();
  // The global norm of the averaged gradient; scales the shards to max_norm if above it
  // (max_norm <= 0: only measures).
  double clip_grad_norm(double max_norm);
  // AdamW on this rank's shard with learning rate lr, then all-gathers the parameters.
  void step(double lr);
  int64_t step_count() const { return step_; }

  // The full optimizer state as "<param>.exp_avg" / ".exp_avg_sq" tensors, gathered from
  // every rank (collective; for checkpoints, which therefore load under any layout).
  std::vector<nn::NamedTensor> gather_state();
  // Takes this rank's shard of full optimizer state tensors (from gather_state or AdamW).
  void load_state(const std::vector<nn::NamedTensor>& state, int64_t step);

 private:
  struct Segment {  // the part of one parameter inside this rank's shard of a bucket
    size_t param;
    int64_t flat;       // offset in the flat buffer
    int64_t in_param;   // offset in the parameter
    int64_t length;
  };
  struct Bucket {
    int64_t begin = 0, length = 0;  // in the flat buffer; length % N == 0
    std::vector<size_t> params;
    int pending = 0;
    std::optional<Tensor> staging;  // stage 2: this micro-batch's full bucket gradients
    std::unique_ptr<comm::Work> work;
    std::vector<Segment> mine;
  };
  // Where parameter k's gradient goes: stage 1 its place in the flat gradients, stage 2 its
  // place in its bucket's staging buffer (allocated on first use in a micro-batch).
  Tensor grad_slot(size_t k);
  void on_grad_ready(size_t param);
  void launch(Bucket& b);
  Tensor shard_grad(const Bucket& b) const;   // this rank's averaged gradient of bucket b
  Tensor shard_state(const Tensor& state, const Bucket& b) const;
  int64_t shard_len(const Bucket& b) const { return b.length / comm_.size(); }
  int64_t shard_begin(const Bucket& b) const { return b.begin + comm_.rank() * shard_len(b); }

  comm::Communicator& comm_;
  const int stage_;
  const optim::AdamWOptions options_;
  std::vector<std::string> names_;
  std::vector<Tensor> params_;
  std::vector<int64_t> flat_offset_;  // param -> offset in the flat buffer
  std::vector<size_t> bucket_of_;
  std::vector<bool> arrived_;         // got a gradient since the step began
  std::vector<Bucket> buckets_;
  std::optional<Tensor> flat_params_;
  std::optional<Tensor> flat_grads_;  // stage 1
  std::optional<Tensor> grad_shard_;  // stage 2: concatenated shards, bucket b's at begin/N
  std::optional<Tensor> m_, v_;       // concatenated shards, like grad_shard_
  bool last_micro_batch_ = true;
  bool first_micro_batch_ = true;
  int64_t step_ = 0;
  std::shared_ptr<bool> alive_;
};

}  // namespace trident::parallel
