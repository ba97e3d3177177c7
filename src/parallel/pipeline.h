// Pipeline parallelism for any model family (models/causal_lm.h): the model's blocks split
// into consecutive chunks, each run
// by one rank of the pipeline group, with micro-batches streaming through them (GPipe,
// Huang et al. 2019; 1F1B, Narayanan et al. 2019 "PipeDream"; interleaved 1F1B with virtual
// stages, Narayanan et al. 2021, as Megatron-LM schedules them).
//
// Layout: P ranks, v chunks per rank (v > 1 only for the interleaved schedule). The blocks
// are split into P * v chunks; chunk k runs on rank k % P (rank r holds chunks r, r + P,
// ...). The first chunk also embeds the tokens (embed()); the last applies the final norm, the
// LM head and the loss (head_loss()). The model says which stage each parameter belongs to
// (block_of()). Activations go forward and their gradients backward by point-to-point messages,
// each op's sends batched with the next op's receives (Note [Batched point-to-point] in
// pipeline.cc: NCCL pairs messages by order, not tag).
//
// A tied embedding (tied_head_weight(): GPT-2's wte): rank 0 owns it (it is in its
// parameters and optimizer). The last
// rank uses a copy as the LM head: rank 0 sends it the weights at the start of every step,
// and after its last backward the last rank sends back the head's accumulated gradient,
// which rank 0 adds to wte's before its own last backward, so wte's gradient is complete
// when data parallelism or ZeRO reduces it (Megatron all-reduces the two copies' gradients
// instead; this keeps one optimizer state). An untied head is the last stage's own.
//
// Mixed precision (set_compute_dtype): activations and their gradients travel in bf16/fp16,
// the head's copy of the tied weight is in that dtype too, and its gradient accumulates in fp32 over the
// step's micro-batches, which is what the last rank sends back.
//
// Schedules, per rank, over m micro-batches (Megatron-LM's orders):
//   gpipe        all forwards, then all backwards
//   1f1b         min(P - r - 1, m) warm-up forwards, then one forward and one backward
//                alternately, then the remaining backwards: at most P - r activations live
//   interleaved  1F1B over the v chunks per rank (needs m divisible by P): a smaller
//                bubble, (P - 1) / (v m + P - 1) instead of (P - 1) / (m + P - 1)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "models/causal_lm.h"
#include "parallel/micro_batch_runner.h"

namespace trident::parallel {

struct PipelineLayout {
  int stages = 1;          // P
  int virtual_stages = 1;  // v
  // Blocks [first, second) of each chunk, P * v of them in model order.
  std::vector<std::pair<int64_t, int64_t>> chunks;

  // As even as possible (earlier chunks get the extra blocks), or the given block counts per
  // chunk. Throws naming the sizes when there are fewer blocks than chunks or the counts do
  // not add up to the model's layers.
  static PipelineLayout make(int64_t layers, int stages, int virtual_stages, const std::vector<int64_t>& counts = {});
  int rank_of_chunk(int chunk) const { return chunk % stages; }
  // The stage that holds a parameter of block `block` (CausalLM::block_of): the embedding's
  // is the first, the head's the last, a block's its chunk's. Throws for a block in no chunk.
  int stage_of_block(int64_t block) const;
  int num_chunks() const { return static_cast<int>(chunks.size()); }
};

// One forward or backward of a schedule: of this rank's local chunk (0..v-1; chunk
// local_chunk * P + rank of the model) and one micro-batch.
struct PipelineOp {
  int local_chunk;
  int micro;
  bool forward;
  // An interleaved steady-state forward that runs with the backward after it as one unit:
  // their receives are posted together before it, their sends together after the backward
  // (Note [Batched point-to-point] in pipeline.cc).
  bool with_next = false;
};

// Rank `rank`'s ops for one step of m micro-batches under `schedule` ("gpipe", "1f1b",
// "interleaved"): what Pipeline runs, and what the planner's time model simulates.
std::vector<PipelineOp> pipeline_schedule(const std::string& schedule, const PipelineLayout& layout, int rank, int m);

// One step's micro-batch, this rank's rows: token ids and next-token targets (B, T).
class Pipeline final : public MicroBatchRunner {
 public:
  // `schedule`: "gpipe", "1f1b" or "interleaved". The model must be whole on every rank
  // (same weights); the pipeline then frees the parameters no chunk of this rank uses.
  // Activations between chunks are (rows, T / sequence_split, C): sequence_split is the
  // tensor-parallel degree under sequence parallelism, else 1.
  Pipeline(models::CausalLM& model, comm::Communicator& pp, PipelineLayout layout, std::string schedule,
           int64_t sequence_split = 1);

  // Mixed precision: call once the parameters switched to `compute` (bf16 or f16).
  void set_compute_dtype(DType compute);
  // Mixed precision, rank 0: where the head's fp32 gradient of the tied weight goes (the fp32
  // accumulation of its gradient: its master's, or ZeRO's), before the step's last backward
  // through the embedding; without one it joins the weight's own gradient.
  void set_head_gradient_sink(std::function<void(const Tensor&)> sink) { head_sink_ = std::move(sink); }

  // This rank's parameters, in the model's order: its chunks' blocks, the embedding's on rank
  // 0 and the head's on the last rank (whose copy of a tied weight is not among them).
  const std::vector<nn::NamedTensor>& parameters() const { return params_; }
  // The pipeline rank that owns parameter `name`.
  int owner(const std::string& name) const { return layout_.stage_of_block(model_.block_of(name)); }
  const PipelineLayout& layout() const { return layout_; }

  // Forward and backward of the step's micro-batches by the schedule. The backward of
  // micro-batch i starts from loss_i * loss_seed; before each backward, before_backward(last)
  // says whether it is the last one for the chunk's parameters (micro-batch m - 1), which is
  // when data parallelism communicates. Returns the sum of the micro-batches' losses, on
  // every rank of the pipeline.
  double train_step(const std::vector<MicroBatch>& micro, double loss_seed,
                    const std::function<void(bool last)>& before_backward);
  // The sum of the losses of `batches` (forward only, without recording), on every rank.
  double evaluate(const std::vector<MicroBatch>& batches) override;
  // As a MicroBatchRunner: train_step() telling `update` before each backward, and once after.
  double train(const std::vector<MicroBatch>& micro, double loss_seed, UpdateStrategy& update) override {
    const double sum = train_step(micro, loss_seed, [&](bool last) { update.begin_backward(last); });
    update.end_backward();
    return sum;
  }

  // Of the last train_step, on this rank: seconds spent waiting for another stage's data, and
  // in all.
  double last_wait_seconds() const { return wait_s_; }
  double last_step_seconds() const { return step_s_; }

 private:
  using Op = PipelineOp;
  std::vector<Op> schedule(int m) const { return pipeline_schedule(schedule_, layout_, pp_.rank(), m); }
  int chunk_of(int local_chunk) const { return local_chunk * layout_.stages + pp_.rank(); }
  Tensor recv(const Shape& shape, DType dtype, int src, int tag);
  // The tied embedding and head weight, if the model has one and it trains (on every rank:
  // the first and last use it).
  std::optional<Tensor> tied_weight() const;
  // Where the stages compute: this rank's parameters' device.
  Device device() const { return params_.front().second.device(); }
  int tag(int chunk, int micro, bool forward, int m) const { return ((chunk * m + micro) * 2) + (forward ? 0 : 1); }

  models::CausalLM& model_;
  comm::Communicator& pp_;
  PipelineLayout layout_;
  std::string schedule_;
  int64_t sequence_split_;
  std::vector<nn::NamedTensor> params_;
  DType compute_ = DType::kF32;  // of the activations
  // Mixed precision, last rank: the head's gradient of the tied weight, fp32, summed over the micro-batches
  // by a grad-ready hook on the copy (shared with it).
  std::shared_ptr<std::optional<Tensor>> head_grad_;
  std::function<void(const Tensor&)> head_sink_;
  // Sends posted without receives, with the tensors they read (Note [Releasing sent tensors]).
  struct InFlightSend {
    std::unique_ptr<comm::Work> work;
    std::vector<Tensor> reads;
  };
  std::vector<InFlightSend> sends_;
  // Drops the sends that have completed, and with them the tensors they read.
  void release_completed_sends();
  double wait_s_ = 0.0, step_s_ = 0.0;
};

}  // namespace trident::parallel
