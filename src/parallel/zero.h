// ZeRO stages 1, 2 and 3 (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training
// Trillion Parameter Models", 2020) for fp32 AdamW, as DeepSpeed implements them.
//
// Layout: the parameters are laid out in one flat fp32 index space, in buckets each padded to
// a multiple of the rank count N. Rank k owns the k-th 1/N of every bucket: its optimizer
// state (m, v) covers only those elements (8P/N bytes), and it updates only them.
//   stage 1  buckets of about bucket_bytes in reverse registration order (the backward's);
//            the parameters are views of one flat buffer (Tensor::set_data). Gradients
//            accumulate (all micro-batches) in a full flat fp32 buffer (4P); on the last
//            micro-batch each bucket is reduce-scattered in place as soon as it is complete.
//            Model states: 4P params + 4P grads + 8P/N optimizer = 8P + 8P/N.
//   stage 2  as stage 1, but each bucket's gradients are gathered in a transient buffer,
//            reduce-scattered as soon as it is complete (every micro-batch), and added into
//            this rank's persistent gradient shard (4P/N): 4P + 12P/N.
//   stage 3  as stage 2, and the parameters are sharded too: one bucket per part of the model
//            (nn/part_hooks.h: a transformer block, or the root). This rank keeps only its
//            parameter shard (4P/N): 16P/N in all. As the model's part hooks, the optimizer
//            all-gathers a part's parameters into a full buffer (the parameters are views of
//            it) just before the part's forward, prefetching the next part's, and frees the
//            buffer after it; a backward hook on the part's output gathers it again just
//            before the part's backward (prefetching the part backward reaches next), and the
//            buffer is freed once the part's gradients are all in and reduce-scattering.
//            At most three parts are gathered at once: the root, the running part and the
//            prefetched one.
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
#pragma once

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
  // compositions] in parallelize.cc).
  ZeroOptimizer(const std::vector<nn::NamedTensor>& params, comm::Communicator& comm, int stage,
                int64_t bucket_bytes, const optim::AdamWOptions& options,
                const std::vector<std::vector<size_t>>& parts = {}, DType compute = DType::kF32,
                bool offload = false, std::unique_ptr<GradReducer> reducer = nullptr);
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
  // The global norm of the averaged gradient; scales the shards to max_norm if above it
  // (max_norm <= 0: only measures). When the shards hold `grad_scale` times the gradient
  // (fp16's loss scale) it divides that out too, and returns the unscaled norm; a non-finite
  // norm (the gradients overflowed) leaves the shards as they are.
  double clip_grad_norm(double max_norm, double grad_scale = 1.0);
  // Under tensor parallelism the model's parameters are shards: the norm also sums the squares
  // of the parameters split[k] over `tp` (replicated ones count once); under pipeline
  // parallelism each stage holds other parameters: the norm sums over `pp` too. Either may
  // be null.
  void set_model_parallel(comm::Communicator* tp, std::vector<bool> split, comm::Communicator* pp) {
    tp_ = tp;
    split_ = std::move(split);
    pp_ = pp;
  }
  // The full AdamW state of this rank's parameters, "<param>.exp_avg" / ".exp_avg_sq",
  // gathered from the ranks (collective; for checkpoints of tensor-parallel shards).
  std::vector<nn::NamedTensor> gather_state();
  // The f32 values of this rank's parameters, gathered from the ranks (collective): the masters
  // under mixed precision.
  std::vector<nn::NamedTensor> gather_masters();
  // AdamW on this rank's shard with learning rate lr, then all-gathers the parameters.
  void step(double lr);
  // Ends a step without updating (fp16: its gradients overflowed): the next backward starts
  // from fresh gradients.
  void skip_step();
  int64_t step_count() const { return step_; }
  GradReducer* reducer() const { return reducer_.get(); }

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
    std::optional<Tensor> values;  // (end - begin) f32 elements; absent from pieces_of()
  };
  // This rank's pieces with their values (views of the shards: write them before stepping;
  // the parameters' are the fp32 masters under mixed precision).
  std::vector<Piece> pieces();
  // Where rank `rank`'s pieces are, without values (for the rank that writes the manifest).
  std::vector<Piece> pieces_of(int rank) const;
  // Reads elements [begin, end) of a logical tensor's flattening from a checkpoint.
  using RangeReader = std::function<Tensor(const std::string& name, int64_t begin, int64_t end)>;
  // Takes this rank's partition of every parameter (the whole parameter in stages 1-2) and,
  // when `with_state`, of the AdamW state, through `read`; then the optimizer's step count.
  // The checkpoint may come from any layout: `read` reassembles whatever pieces it has.
  void load(const RangeReader& read, bool with_state, int64_t step);

 private:
  struct Segment {  // the part of one parameter inside a rank's shard of a bucket
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
    bool reduced = false;  // this micro-batch's reduce-scatter finished and was folded in
    bool final = false;    // launched on the step's last micro-batch (stage 1: always)
    std::vector<Segment> mine;
    // Stage 3: the bucket's full parameters (its parameters are views of it), holding memory
    // only while gathered; the gather in flight.
    std::optional<Tensor> gathered;
    std::unique_ptr<comm::Work> gather;
    enum class State { kReleased, kGathering, kGathered } state = State::kReleased;
  };
  // Where parameter k's gradient goes: stage 1 its place in the flat gradients, stage 2 its
  // place in its bucket's staging buffer (allocated on first use in a micro-batch).
  Tensor grad_slot(size_t k);
  void on_grad_ready(size_t param);
  void launch(Bucket& b);
  // Waits for bucket b's reduce-scatter and folds it into the step's gradient shard; on the
  // last micro-batch under ZeRO-Offload, starts copying the shard to the host.
  void finish_reduce(Bucket& b);
  // ZeRO-Offload: waits for the copies between host and device, if any are in flight.
  void wait_copies();
  Tensor shard_grad(const Bucket& b) const;   // this rank's averaged gradient of bucket b
  Tensor shard_params(const Bucket& b) const; // this rank's parameters of bucket b
  Tensor shard_masters(const Bucket& b) const;  // their f32 values: the masters, or themselves
  // Every bucket's shards (shard_of(b) on each rank), gathered into full f32 tensors named
  // after the parameters plus `suffix`.
  std::vector<nn::NamedTensor> gather(const std::function<Tensor(const Bucket&)>& shard_of, const std::string& suffix);
  bool mixed() const { return compute_ != DType::kF32; }
  bool has_masters() const { return mixed() || offload_; }  // a master shard apart from the parameters
  Tensor shard_state(const Tensor& state, const Bucket& b) const;
  int64_t shard_len(const Bucket& b) const { return b.length / comm_.size(); }
  int64_t shard_begin(const Bucket& b) const { return b.begin + comm_.rank() * shard_len(b); }
  // The parts of bucket b's parameters inside rank `rank`'s shard (b.mine for this rank).
  std::vector<Segment> segments_of(const Bucket& b, int rank) const;
  // Stage 3: starts gathering bucket u's parameters (if released); gathers and waits.
  void start_gather(size_t u);
  void gather_now(size_t u);
  void release(size_t u);

  comm::Communicator& comm_;
  const int stage_;
  Device device_ = Device::cpu();  // the parameters', where every flat buffer lives
  const optim::AdamWOptions options_;
  const DType compute_;                // the parameters' dtype
  const bool offload_;
  Device state_device_ = Device::cpu();  // the masters' and AdamW state's: the host when offloaded
  std::vector<std::string> names_;
  std::vector<Tensor> params_;
  std::vector<int64_t> flat_offset_;  // param -> offset in the flat buffer
  std::vector<size_t> bucket_of_;
  std::vector<bool> arrived_;         // got a gradient since the step began
  // Stages 2-3: the bucket whose reduce-scatter was posted last and is not folded in yet
  // (Note [Staged buckets]).
  std::optional<size_t> posted_;
  std::vector<Bucket> buckets_;
  std::optional<Tensor> flat_params_;  // stages 1-2
  std::optional<Tensor> param_shard_;  // stage 3: concatenated shards, bucket b's at begin/N
  std::optional<Tensor> master_shard_; // mixed precision or offload: f32 masters, like param_shard_
  std::optional<Tensor> host_grads_;   // offload: the gradient shard, copied to the host to step
  std::optional<Tensor> host_params_;  // offload, mixed: the stepped masters rounded, on their way back (2P/N pinned)
  bool copies_in_flight_ = false;      // offload: copies between host and device not yet waited for
  std::optional<Tensor> flat_grads_;  // stage 1
  std::optional<Tensor> grad_shard_;  // stage 2: concatenated shards, bucket b's at begin/N
  std::optional<Tensor> m_, v_;       // concatenated shards, like grad_shard_
  bool last_micro_batch_ = true;
  bool first_micro_batch_ = true;
  int64_t step_ = 0;
  // Stage 3: parts whose forward finished in this forward pass, in order (the backward meets
  // them in reverse), and how deep in nested parts the forward is.
  std::vector<size_t> completed_;
  int depth_ = 0;
  comm::Communicator* tp_ = nullptr;
  comm::Communicator* pp_ = nullptr;
  std::vector<bool> split_;
  std::shared_ptr<bool> alive_;
  std::unique_ptr<GradReducer> reducer_;
};

}  // namespace trident::parallel
