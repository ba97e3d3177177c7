// How a ZeRO rank turns the backward's gradients into its averaged gradient shard: the flow
// both gradient policies share. The model's grad-ready hooks hand each parameter's gradient
// in as soon as it is final; it is folded (in fp32, whatever the parameters' dtype) into the
// policy's slot for it and the parameter's .grad is dropped. Once a bucket's gradients are
// all in, its reduce-scatter starts, asynchronously, so communication overlaps the rest of the
// backward; each hook also tests the reductions in flight, driving MPI's progress.
// end_backward() launches, in bucket order, the buckets with a parameter that got no gradient
// (zeros for it; every rank launches the same collectives in the same order) and waits for
// every reduction. The averaged shard is then shard(u), until the step ends.
//
// The policies say where the gradients are held and when they are reduced:
//   FlatGradients (flat_gradients.h, stage 1)      a full flat f32 buffer summing the step's
//       micro-batches, reduce-scattered in place on the last one
//   StagedGradients (staged_gradients.h, stages 2-3)  a staging buffer per bucket and
//       micro-batch, reduce-scattered every micro-batch into a persistent gradient shard
//
// Not here: what the rest of ZeRO does when a bucket is launched or its final shard is in
// (Hooks: ZeRO-3 frees the part's parameters, ZeRO-Offload copies the shard to the host),
// the norm and clipping, the update (zero.h).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "parallel/grad_reducer.h"
#include "parallel/zero/layout.h"

namespace trident::parallel::zero {

class GradientShards {
 public:
  // Where the rest of ZeRO joins the reduction.
  struct Hooks {
    // Bucket u's gradients are all in and its reduction started: no op of this backward reads
    // its parameters any more.
    std::function<void(size_t u)> launched;
    // A reduction launched on the step's last micro-batch was folded in: bucket u's shard is
    // final.
    std::function<void(size_t u)> final_shard;
  };
  GradientShards(const ZeroLayout& layout, comm::Communicator& comm, Hooks hooks);
  virtual ~GradientShards() = default;
  GradientShards(const GradientShards&) = delete;
  GradientShards& operator=(const GradientShards&) = delete;

  // Before each micro-batch's backward: whether it is the step's last.
  void begin_backward(bool last_micro_batch) { last_micro_batch_ = last_micro_batch; }
  // Parameter k's gradient is final in this backward (its grad-ready hook).
  void grad_ready(size_t k);
  // Adds `grad` (any float dtype, parameter k's shape) to parameter k's gradient in this
  // micro-batch, as if the backward had produced it.
  void add(size_t k, const Tensor& grad);
  // After each micro-batch's backward: completes that backward's communication.
  void end_backward();
  // The step ended, stepped or skipped: the next backward starts from fresh gradients.
  void end_step();
  // This rank's averaged gradient of bucket u, once the step's last backward has ended
  // (views: scaling them scales the gradients).
  virtual Tensor shard(size_t u) const = 0;
  virtual GradReducer* reducer() const { return nullptr; }

 protected:
  // Where parameter k's gradient goes in this micro-batch (f32).
  virtual Tensor slot(size_t k) = 0;
  // Whether this micro-batch's backward reduces its buckets.
  virtual bool reduces_now() const = 0;
  // Starts bucket u's reduction.
  virtual std::unique_ptr<comm::Work> start(size_t u) = 0;
  // Bucket u's reduction has completed: averages it into the gradient shard.
  virtual void fold(size_t u) = 0;
  // Bucket u's reduction was just launched from the backward's hooks.
  virtual void posted(size_t u) { (void)u; }
  // A hook's test found bucket u's reduction complete.
  virtual void completed(size_t u) { (void)u; }
  // end_backward() has folded in every reduction of this micro-batch.
  virtual void micro_batch_reduced() {}

  // Waits for bucket u's reduction and folds it in.
  void finish(size_t u);
  // Completes every reduction in flight (Work's destructor waits for it): a policy's
  // destructor calls it before the buffers they write go.
  void drain();
  // Forgets which parameters got a gradient (the next one a parameter gets starts its slot).
  void forget_arrivals();
  bool last_micro_batch() const { return last_micro_batch_; }
  bool first_micro_batch() const { return first_micro_batch_; }

  const ZeroLayout& layout_;
  comm::Communicator& comm_;

 private:
  struct Flight {  // a bucket's reduction in this micro-batch
    int pending = 0;  // its parameters still without a gradient
    std::unique_ptr<comm::Work> work;
    bool reduced = false;  // this micro-batch's reduction finished and was folded in
    bool final = false;    // launched on the step's last micro-batch
  };
  void accumulate(size_t k, const Tensor& slot, const Tensor& g);
  void launch(size_t u);

  Hooks hooks_;
  std::vector<Flight> flights_;  // per bucket
  std::vector<bool> arrived_;    // per parameter: got a gradient since its slot was fresh
  bool last_micro_batch_ = true;
  bool first_micro_batch_ = true;
};

}  // namespace trident::parallel::zero
