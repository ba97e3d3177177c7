// ZeRO stages 1, 2 and 3 (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training
// Trillion Parameter Models", 2020) for fp32 AdamW, as DeepSpeed implements them.
//
// Layout (zero/layout.h): the parameters are laid out in one flat fp32 index space, in buckets
// each padded to a multiple of the rank count N. Rank k owns the k-th 1/N of every bucket: its
// optimizer state (m, v) covers only those elements (8P/N bytes), and it updates only them
// (zero/sharded_adamw.h). A stage is this core with two policies, how gradients are held and
// reduced, and how parameters are held:
//   stage 1  buckets of about bucket_bytes in reverse registration order (the backward's);
//            the parameters are views of one flat buffer (zero/replicated_parameters.h).
//            Gradients accumulate (all micro-batches) in a full flat fp32 buffer (4P); on the
//            last micro-batch each bucket is reduce-scattered in place as soon as it is
//            complete (zero/flat_gradients.h).
//            Model states: 4P params + 4P grads + 8P/N optimizer = 8P + 8P/N.
//   stage 2  as stage 1, but each bucket's gradients are gathered in a transient buffer,
//            reduce-scattered as soon as it is complete (every micro-batch), and added into
//            this rank's persistent gradient shard (4P/N; zero/staged_gradients.h): 4P + 12P/N.
//   stage 3  as stage 2, and the parameters are sharded too: one bucket per part of the model
//            (nn/part_hooks.h: a transformer block, or the root). This rank keeps only its
//            parameter shard (4P/N): 16P/N in all. As the model's part hooks, the optimizer
//            gathers a part's parameters around its forward and its backward
//            (zero/sharded_parameters.h); at most three parts are gathered at once.
// Stages 1-2: after AdamW on the shard, every bucket is all-gathered in place, so all ranks
// hold the full updated parameters. Per step each rank hands P elements to reduce-scatters
// and P to all-gathers (stage 3: 2P to all-gathers, forward and backward, per micro-batch).
// The global gradient norm for clipping is an all-reduce of the shards' sums of squares.
// Parameters' .grad is dropped as soon as it is folded into the flat buffers.
//
// Mixed precision (bf16/fp16, as DeepSpeed's ZeRO with bf16/fp16 and Megatron's distributed
// optimizer): the model's parameters, and so the flat parameters, the gathers and the model's
// gradients, are in the compute dtype; gradients accumulate and are reduced in fp32; each rank
// keeps the fp32 master copy of its shard only (4P/N) beside m and v, steps it, and rounds it
// into its shard of the parameters before the all-gather. Model states: stage 1 2P + 4P +
// 12P/N, stage 2 2P + 16P/N, stage 3 18P/N. fp16's loss scale is undone, and an overflow
// found, in clip_grad_norm; skip_step() drops an overflowing step's gradients.
//
// This class is the composition: it chooses the policies by stage, owns the masters (they are
// filled before the parameters switch dtype), and keeps what every stage does alike: the
// norm and clipping, the step's order, gathers for checkpoints, pieces and loading.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <memory>
#include <optional>
#include <vector>

#include "comm/communicator.h"
#include "nn/module.h"
#include "nn/part_hooks.h"
#include "optim/adamw.h"
#include "parallel/grad_reducer.h"
#include "parallel/zero/layout.h"
#include "parallel/zero/parameter_store.h"
#include "parallel/zero/state_store.h"

namespace trident::parallel::zero {
class GradientShards;
class ParameterHolder;
class ShardedAdamW;
}  // namespace trident::parallel::zero

namespace trident::parallel {

class ZeroOptimizer : public nn::PartHooks {
 public:
  // `params`: the model's f32 parameters (broadcast from rank 0 here). Stage 3 needs `parts`,
  // the model's parameter groups as indices into `params`, in the order the forward enters
  // them (GPT2::parts()), and must be installed as the model's part hooks; it frees the
  // parameters' storage, which the hooks gather while a part runs.
  // Their f32 values become the masters when `compute` is bf16 or f16; the parameters then
  // switch to `compute`. `offload` (ZeRO-Offload): the fp32 masters' shard, m and v live in
  // pinned host memory; on the last micro-batch each bucket's gradient shard starts for the
  // host as soon as its reduce-scatter is folded in (overlapping the rest of the backward),
  // AdamW steps on the host (the multi-threaded CPU AdamW) bucket by bucket, and each bucket's
  // updated shard goes back to the parameters' device while the host steps the next.
  // `reducer` (stage 1, parallel.grad_compression): averages each whole bucket instead of the
  // reduce-scatter, and this rank keeps its shard of the mean (Note [Compressed gradients'
  // compositions] in parallelize.cc). `nvme` (ZeRO-Infinity's optimizer tier, with `offload`):
  // the masters, m and v live in a file under nvme->dir instead (zero/state_store.h).
  // `nvme_params` (ZeRO-Infinity's parameter tier, stage 3 with `offload`): this rank's
  // parameter shard lives in a file under nvme_params->dir (zero/parameter_store.h); with the
  // model on a device too, behind host staging buffers (Note [The parameter tier behind a
  // device] in zero/sharded_parameters.h).
  ZeroOptimizer(const std::vector<nn::NamedTensor>& params, comm::Communicator& comm, int stage,
                int64_t bucket_bytes, const optim::AdamWOptions& options,
                const std::vector<std::vector<size_t>>& parts = {}, DType compute = DType::kF32,
                bool offload = false, std::unique_ptr<GradReducer> reducer = nullptr,
                const std::optional<zero::NvmeStateOptions>& nvme = std::nullopt,
                const std::optional<zero::NvmeParamOptions>& nvme_params = std::nullopt);
  ~ZeroOptimizer();
  ZeroOptimizer(const ZeroOptimizer&) = delete;
  ZeroOptimizer& operator=(const ZeroOptimizer&) = delete;

  // Before each micro-batch's backward: whether it is the step's last.
  void begin_backward(bool last_micro_batch);
  // After each micro-batch's backward: completes that backward's communication.
  void end_backward();
  // Adds `grad` (any float dtype, the parameter's shape) to parameter `name`'s gradient in
  // this micro-batch, in fp32, as if its backward had produced it: a gradient from outside the
  // backward (the pipeline's head). Call it before the backward whose gradients it joins.
  void add_grad(const std::string& name, const Tensor& grad);
  // Whether parameter `name` is one of this optimizer's.
  bool holds(const std::string& name) const;
  // The sums of squares of this rank's averaged gradient shards, each summed over the group's
  // ranks (collective over it): by_split, [those of the parameters split[k] marks (tensor
  // parallelism's shards), the others]; else [0, all of them]. Padding counts zero.
  std::array<double, 2> grad_squares(bool by_split);
  // Multiplies the gradient shards by `factor` (clipping, and undoing fp16's loss scale).
  void scale_grads(double factor);
  // Which parameters tensor parallelism splits (grad_squares' by_split), by index.
  void set_split(std::vector<bool> split) { split_ = std::move(split); }
  // AdamW on this rank's shard with learning rate lr, then all-gathers the parameters.
  void step(double lr);
  // Ends a step without updating (fp16: its gradients overflowed): the next backward starts
  // from fresh gradients.
  void skip_step();
  int64_t step_count() const { return step_; }
  // The optimizer state's store (zero/state_store.h): its NVMe traffic, for tests and metrics.
  const zero::StateStore& state() const { return *state_; }
  // How the parameters are held (zero/parameters.h): the NVMe tier's file, for its traffic.
  const zero::ParameterHolder& parameters() const { return *params_; }
  GradReducer* reducer() const;

  // Stage 3, as the model's part hooks: gathers part `part`'s parameters around its forward.
  Tensor run(size_t part, const nn::PartForward& forward, const Tensor& x) override;

  // Checkpoints, sharded: each rank saves what it owns, as pieces of logical tensors, the
  // parameters (under their names) and the AdamW state ("<name>.exp_avg", ".exp_avg_sq"):
  // elements [begin, end) of the tensor's row-major flattening. Stages 1-2 hold the full
  // parameters on every rank but each rank saves only its partition, so the ranks' pieces
  // cover every tensor exactly once, whatever the stage.
  struct Piece {
    std::string name;  // logical tensor
    Shape shape;       // its full shape
    int64_t begin = 0, end = 0;
    std::optional<Tensor> values;  // (end - begin) f32 elements
    // Set instead of `values` when the state is on NVMe: reads the piece's values from the
    // tier when called (before the next step), so a checkpoint streams the state.
    std::function<Tensor()> load;
  };
  // This rank's pieces with their values (views of the shards: write them before stepping;
  // the parameters' are the fp32 masters under mixed precision), or, with the state on NVMe,
  // their loaders. Each segment's parameter, m and v follow each other, so a checkpoint that
  // writes them in this order reads each of the tier's units once (Note [Streaming the tier
  // into a checkpoint] in zero.cc).
  std::vector<Piece> pieces();
  // Reads elements [begin, end) of a logical tensor's flattening from a checkpoint.
  using RangeReader = zero::RangeReader;
  // Takes this rank's partition of every parameter (the whole parameter in stages 1-2) and,
  // when `with_state`, of the AdamW state, through `read`; then the optimizer's step count.
  // The checkpoint may come from any layout: `read` reassembles whatever pieces it has.
  void load(const RangeReader& read, bool with_state, int64_t step);

 private:
  using Bucket = zero::Bucket;
  using Segment = zero::Segment;
  // Rank 0's f32 values of bucket b (laid out as in the flat buffer): this rank's shard of
  // them become its masters, and `into` (the bucket's parameters in the compute dtype) gets
  // them all; the parameters become views of `into`.
  void take_values(const Bucket& b, const Tensor& into);
  bool mixed() const { return compute_ != DType::kF32; }
  bool has_masters() const { return mixed() || offload_; }  // a master shard apart from the parameters

  comm::Communicator& comm_;
  const DType compute_;  // the parameters' dtype
  const bool offload_;
  zero::ZeroLayout layout_;
  // The masters (mixed precision or offload), m and v: in memory on the optimizer's device
  // (pinned host memory when offloaded), or on NVMe.
  std::unique_ptr<zero::StateStore> state_;
  std::unique_ptr<zero::ParameterHolder> params_;
  std::unique_ptr<zero::GradientShards> grads_;
  std::unique_ptr<zero::ShardedAdamW> adamw_;
  int64_t step_ = 0;
  std::vector<bool> split_;
  std::shared_ptr<bool> alive_;  // the grad-ready hooks' check that this object still exists
};

}  // namespace trident::parallel
