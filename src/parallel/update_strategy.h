// How one rank's gradients become the step's update: one interface over the ways trident
// does it, so the trainer's step has no branch per strategy (DeepSpeed's engine.backward /
// engine.step, torchtitan's optimizer container):
//
//   ReplicatedUpdate (replicated_update.h)  AdamW on this rank's whole parameters: one process,
//       data parallel (gradients averaged in buckets), mixed precision's fp32 masters (on the
//       host with ZeRO-Offload in one process), tensor and pipeline parallel (the clip's norm
//       summed over their groups).
//   ZeroUpdate (zero_update.h)  ZeRO stages 1-3 over the data-parallel group, with mixed
//       precision and offload of their own.
//
// parallelize() (parallelize.h) builds the one a config asks for. The trainer calls, per step:
// begin_backward(last) before each micro-batch's backward (a pipeline calls it before each of
// its backwards), end_backward() after each micro-batch's backward (a pipeline: once after its
// step), finish_backward() after the last, then step() and zero_grads().
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "nn/module.h"
#include "optim/mixed_precision.h"
#include "parallel/mesh.h"

namespace trident::parallel {

// Trainable parameters whose gradients are averaged over one group of ranks (the placement
// table's reduction groups, parallel/placement.h): dense parameters over the data-parallel
// axes, an expert's over its expert-data-parallel group. Frozen parameters are in none.
struct ParamGroup {
  AxisSet reduce_over;                  // the mesh axes of the group
  comm::Communicator* comm = nullptr;   // their communicator; null in one process
  std::vector<nn::NamedTensor> params;  // this rank's tensors of the group's parameters, in model order
};

// A piece of a tensor a strategy holds, for checkpoints (train/checkpoint_pieces.h writes it
// where the placement table says it belongs in the logical tensor): a weight (the fp32 value
// the optimizer steps, under the parameter's name) or its optimizer state ("<param>.exp_avg",
// ".exp_avg_sq"), as this rank holds it: its tensor-parallel part, whole or a flat range.
struct HeldPiece {
  std::string tensor;  // the checkpoint tensor
  std::string param;   // the parameter it belongs to
  // Elements [begin, end) of the row-major flattening of the rank's local tensor (its
  // tensor-parallel part of the parameter's shape).
  int64_t begin = 0, end = 0;
  // Partitioned among the ranks of the reduction group (ZeRO: each holds other elements);
  // false: the whole local tensor, the same on every rank of the group.
  bool partitioned = false;
  std::optional<Tensor> values;  // end - begin elements (partitioned), or the whole local tensor
  // Set instead of `values` for a partitioned piece read only when it is written (ZeRO's state
  // on NVMe: a checkpoint streams it): returns its end - begin f32 elements.
  std::function<Tensor()> load;
};

struct StepOutcome {
  double grad_norm = 0.0;  // of the whole model's (averaged, unscaled) gradient; NaN when skipped
  bool skipped = false;    // fp16: the gradients overflowed, so nothing was updated
};

// What step() is told about the step.
struct StepContext {
  double lr = 0.0;
  double max_norm = 0.0;                    // optim.grad_clip (<= 0: measure only)
  optim::DynamicLossScaler* scaler = nullptr;  // the loss scale the gradients carry
  bool loss_scaling = false;                // fp16: skip and back off on overflow
  // Whether a condition holds on every rank (collective), so that every rank decides alike.
  std::function<bool(bool)> all_ranks;
};

// Where a checkpoint's tensors come from when a strategy loads its state (the trainer's
// checkpoint code provides them; each throws on a missing, corrupt or mis-shaped tensor):
// `whole`: tensor `name` as this rank holds it (its tensor-parallel shard of parameter `param`);
// `assign`: the same, copied into `dst` (shape-checked, dtype-converted); `range`: elements
// [begin, end) of it, flattened.
struct CheckpointSource {
  std::function<Tensor(const std::string& name, const std::string& param)> whole;
  std::function<void(const std::string& name, const Tensor& dst)> assign;
  std::function<Tensor(const std::string& name, int64_t begin, int64_t end)> range;
  // Tensor `name` of this rank's own state (rank_state()), as this rank saved it.
  std::function<Tensor(const std::string& name)> of_rank;
};

// The parameter an optimizer-state tensor belongs to: "<param>.exp_avg(_sq)" -> "<param>";
// any other name is returned as it is.
std::string parameter_of_state(const std::string& name);

class UpdateStrategy {
 public:
  virtual ~UpdateStrategy() = default;

  // Before a micro-batch's backward; `last`: the step's last (its gradients are final, so data
  // parallelism and ZeRO communicate during it).
  virtual void begin_backward(bool last) = 0;
  // After a micro-batch's backward: completes what it started (offloaded copies, ZeRO's
  // reductions).
  virtual void end_backward() = 0;
  // After the step's last backward: waits for the gradients' reduction.
  virtual void finish_backward() = 0;
  // A gradient reaching parameter `name` from outside the backward (a pipeline's tied head),
  // before the backward whose gradients it joins; in fp32 where they accumulate in fp32.
  virtual void add_grad(const std::string& name, const Tensor& grad) = 0;
  // Clips and updates with ctx.lr, or (fp16) skips a step whose gradients overflowed.
  virtual StepOutcome step(const StepContext& ctx) = 0;
  // Clears what the strategy holds of this step's gradients (the model's own: Module::zero_grad).
  virtual void zero_grads() = 0;

  // Optimizer steps taken.
  virtual int64_t step_count() const = 0;
  // Checkpoints (Note [Checkpoints from placements] in train/checkpoint_pieces.h). Loading, in
  // two calls: the whole weights this strategy holds (and the model's
  // compute-dtype parameters rounded from them), before the trainer reads its own state; then
  // the optimizer's state and step (`with_state`: the checkpoint has AdamW state), and for
  // ZeRO its partition of the weights too.
  virtual void load_weights(const CheckpointSource& source) = 0;
  virtual void load_state(const CheckpointSource& source, bool with_state, int64_t step) = 0;
  // What this rank holds of every weight and optimizer-state tensor, for checkpoints: views
  // of the live tensors (write them before the next step). Not collective.
  virtual std::vector<HeldPiece> held_pieces() = 0;
  // ZeRO-Infinity's optimizer tier (zero/state_store.h): this rank's bytes read and written and
  // seconds waited so far, over its optimizers; nullopt without the tier.
  struct TierTraffic {
    int64_t read_bytes = 0, written_bytes = 0;
    double wait_s = 0.0;
  };
  virtual std::optional<TierTraffic> tier_traffic() const { return std::nullopt; }
  // State that differs between the data-parallel ranks (compressed gradients' error feedback),
  // saved by every rank; the same names and shapes on every rank. load_state() reads it back
  // through source.of_rank.
  virtual std::vector<nn::NamedTensor> rank_state() const { return {}; }
};

}  // namespace trident::parallel
