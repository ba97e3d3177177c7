// Applies a run's parallelism to a model built for one device, in the one order that works
// (torchtitan's parallelize_llama, Megatron's model provider + DDP wrapping), and returns what
// the trainer drives: the mesh, the tensor-parallel plan, the pipeline and the update strategy.
//
// Note [The order of strategies]
//  1. The mesh: the ranks as pp x dp x tp, its collectives on NCCL for a GPU run (whose setup
//     picks this process's GPU, so it comes before the model moves there).
//  2. Tensor (and sequence) parallelism shards the model: every rank built the same whole
//     model from the same seed or weights, and keeps its shards (the family's plan,
//     tensor_parallel.h).
//  3. The pipeline keeps this rank's stage and frees the rest (pipeline.h).
//  4. The model moves to the device: only what this rank kept.
//  5. Precision: fp32 masters beside a bf16/fp16 model (MasterWeights), or ZeRO's own.
//  6. The update over the data-parallel group: ZeRO 1-3 (with its masters and offload), or
//     AdamW on replicated parameters with data parallelism's averaged gradients
//     (update_strategy.h). ZeRO-3 becomes the model's part hooks.
//  7. Under mixed precision the pipeline exchanges compute-dtype activations, and its tied
//     head's gradient joins the strategy's fp32 accumulation.
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "core/device.h"
#include "core/status.h"
#include "models/causal_lm.h"
#include "optim/adamw.h"
#include "optim/mixed_precision.h"
#include "parallel/mesh.h"
#include "parallel/micro_batch_runner.h"
#include "parallel/parallel_options.h"
#include "parallel/pipeline.h"
#include "parallel/tensor_parallel.h"
#include "parallel/update_strategy.h"

namespace trident::parallel {

struct Parallelized {
  std::unique_ptr<DeviceMesh> mesh;             // null without a communicator (one process)
  std::unique_ptr<TensorParallelPlan> tp_plan;  // parallel.tp > 1
  std::unique_ptr<Pipeline> pipeline;           // parallel.pp > 1
  std::unique_ptr<MicroBatchRunner> sequential; // without a pipeline: the whole model
  std::unique_ptr<UpdateStrategy> update;
  // How the step's micro-batches run: the pipeline, or the sequential runner.
  MicroBatchRunner* runner() const { return pipeline ? static_cast<MicroBatchRunner*>(pipeline.get()) : sequential.get(); }
};

// Throws, naming the keys and the rank count, when `options` cannot run on `world_size` ranks
// (tp x pp must divide it; ZeRO 2-3 do not compose with pipelines; ...).
void check_layout(const ParallelOptions& options, int world_size);

// Parallelizes `model` by `options` over `comm` (null: one process) on `device`, in the order
// of Note [The order of strategies]. An unreadable parallel.pipeline_layers is an error Status.
StatusOr<Parallelized> parallelize(models::CausalLM& model, std::shared_ptr<comm::Communicator> comm, Device device,
                                   const ParallelOptions& options, const optim::PrecisionOptions& precision,
                                   const optim::AdamWOptions& adamw);

}  // namespace trident::parallel
