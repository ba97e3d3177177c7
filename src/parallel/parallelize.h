// Applies a run's parallelism to a model built for one device, in the one order that works
// (torchtitan's parallelize_llama, Megatron's model provider + DDP wrapping), and returns what
// the trainer drives: the mesh, the placement table, the tensor-parallel plan, the pipeline and
// the update strategy.
//
// Note [The order of strategies]
//  1. The mesh: the ranks along named axes (mesh.h), its collectives on NCCL for a GPU run
//     (whose setup picks this process's GPU, so it comes before the model moves there).
//  2. Tensor (and sequence) parallelism shards the model: every rank built the same whole
//     model from the same seed or weights, and keeps its shards (the family's plan,
//     tensor_parallel.h).
//  3. The pipeline keeps this rank's stage and frees the rest (pipeline.h).
//  4. The placement table: every parameter's placement on each axis, whether it trains, its
//     storage dtype and reduction group (placement.h). Everything below reads it.
//  5. The model moves to the device: only what this rank kept.
//  6. Precision: frozen parameters are cast to their storage dtype; trainable ones get fp32
//     masters beside a bf16/fp16 model (MasterWeights), or ZeRO's own.
//  7. The update over each reduction group: ZeRO 1-3 (with its masters and offload), or
//     AdamW on replicated parameters with data parallelism's averaged gradients
//     (update_strategy.h). ZeRO-3 becomes the model's part hooks. Frozen parameters are in no
//     group: no gradient, no state, no collective.
//  8. Under mixed precision the pipeline exchanges compute-dtype activations, and its tied
//     head's gradient joins the strategy's fp32 accumulation.
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "core/device.h"
#include "core/status.h"
#include "models/causal_lm.h"
#include "models/model_config.h"
#include "optim/adamw.h"
#include "optim/mixed_precision.h"
#include "parallel/mesh.h"
#include "parallel/micro_batch_runner.h"
#include "parallel/parallel_options.h"
#include "parallel/placement.h"
#include "parallel/update_strategy.h"

namespace trident::parallel {

class Pipeline;
class TensorParallelPlan;

struct Parallelized {
  std::unique_ptr<DeviceMesh> mesh;             // null without a communicator (one process)
  std::unique_ptr<PlacementTable> placements;   // every parameter's (Note [Placements])
  std::unique_ptr<TensorParallelPlan> tp_plan;  // parallel.tp > 1
  std::unique_ptr<Pipeline> pipeline;           // parallel.pp > 1
  std::unique_ptr<MicroBatchRunner> sequential; // without a pipeline: the whole model
  std::unique_ptr<UpdateStrategy> update;
  // How the step's micro-batches run: the pipeline, or the sequential runner.
  MicroBatchRunner* runner() const;
  // This rank's coordinates: its pipeline stage and tensor-parallel rank (0 without them).
  int stage() const { return mesh ? mesh->pp_rank() : 0; }
  int tp_rank() const { return mesh ? mesh->tp_rank() : 0; }

  Parallelized();
  Parallelized(Parallelized&&) noexcept;
  Parallelized& operator=(Parallelized&&) noexcept;
  // The update first: ZeRO-3 is the model's part hooks.
  ~Parallelized();
};

// The parallel.* layout `options` on `world_size` ranks, for a model of `model` (its family's
// own rules: tensor parallelism's divisibility, blocks for the pipeline's stages): throws,
// naming the keys and the sizes, when the trainer cannot run it. The planner enumerates
// layouts with the same function (planner/search.h).
void check_layout(const ParallelOptions& options, int world_size);
// `seq_len` (data.seq_len; 0: not checked): sequence parallelism splits it over tp.
void check_layout(const models::ModelConfig& model, const ParallelOptions& options, int world_size,
                  int64_t seq_len = 0);

// Parallelizes `model` by `options` over `comm` (null: one process) on `device`, in the order
// of Note [The order of strategies]. A parameter that does not require a gradient
// (Tensor::set_requires_grad(false) before this call, nn/freeze.h) is frozen. An unreadable
// parallel.pipeline_layers is an error Status.
StatusOr<Parallelized> parallelize(models::CausalLM& model, std::shared_ptr<comm::Communicator> comm, Device device,
                                   const ParallelOptions& options, const optim::PrecisionOptions& precision,
                                   const optim::AdamWOptions& adamw);

}  // namespace trident::parallel
