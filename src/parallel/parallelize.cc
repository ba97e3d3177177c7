#include "parallel/parallelize.h"

#include <algorithm>
#include <sstream>

#include "comm/device_communicator.h"
#include "parallel/onebit_adam.h"
#include "parallel/replicated_update.h"
#include "parallel/zero_update.h"

namespace trident::parallel {

void check_layout(const ParallelOptions& options, int world_size) {
  const int64_t model_parallel = options.tp * options.pp;
  TRI_CHECK(world_size % model_parallel == 0, "parallel.tp (", options.tp, ") x parallel.pp (", options.pp,
            ") must divide the number of ranks (", world_size,
            "): start the run with mpirun or trident launch on a multiple of tp x pp ranks");
  TRI_CHECK(options.pp == 1 || options.zero_stage <= 1, "parallel.zero_stage = ", options.zero_stage,
            " with parallel.pp = ", options.pp, " is not supported; pipeline parallelism composes with ZeRO stages 0-1");
  TRI_CHECK(options.pp > 1 || (options.virtual_stages == 1 && options.pipeline_layers.empty()),
            "parallel.virtual_stages and parallel.pipeline_layers need parallel.pp > 1");
  TRI_CHECK(!options.sequence_parallel || options.tp > 1,
            "parallel.sequence_parallel needs parallel.tp > 1 (it splits the tensor-parallel ranks' sequence)");
  TRI_CHECK(!options.offload_optimizer || options.zero_stage > 0 || (world_size == 1 && model_parallel == 1),
            "parallel.offload_optimizer with several ranks needs ZeRO (parallel.zero_stage 1-3, as DeepSpeed's "
            "ZeRO-Offload): ",
            world_size, " ranks, tp ", options.tp, ", pp ", options.pp, ", zero_stage 0 requested");
  // Note [Compressed gradients' compositions]: a compressor replaces the averaging of whole
  // replicated gradients: data parallelism's buckets, and ZeRO-1's (averaged whole, then this
  // rank's shard taken). ZeRO-2/3 reduce-scatter every micro-batch into gradient shards, and
  // 1-bit Adam's optimizer steps the whole replicated momentum; tensor and pipeline
  // parallelism would need their norms and shards threaded through the compressors.
  const std::string& gc = options.grad_compression;
  if (gc != "none") {
    const int64_t max_stage = gc == "onebit_adam" ? 0 : 1;
    TRI_CHECK(options.zero_stage <= max_stage, "parallel.grad_compression = ", gc, " with parallel.zero_stage = ",
              options.zero_stage, " is not supported; ", gc, " composes with data parallelism",
              max_stage == 1 ? " and ZeRO-1 (zero_stage 0-1)" : " (zero_stage 0)");
    TRI_CHECK(options.tp == 1 && options.pp == 1, "parallel.grad_compression = ", gc, " with parallel.tp = ", options.tp,
              " and parallel.pp = ", options.pp, " is not supported; compressed gradients need tp = pp = 1");
    TRI_CHECK(!options.offload_optimizer, "parallel.grad_compression = ", gc,
              " with parallel.offload_optimizer is not supported");
  }
  if (gc == "onebit_adam") check_onebit_block(options.onebit_block);
}

StatusOr<Parallelized> parallelize(models::CausalLM& model, std::shared_ptr<comm::Communicator> comm, Device device,
                                   const ParallelOptions& options, const optim::PrecisionOptions& precision,
                                   const optim::AdamWOptions& adamw) {
  Parallelized out;
  // 1-3: the mesh, tensor parallelism, the pipeline.
  if (comm) {
    std::shared_ptr<comm::Communicator> collectives = comm;
    if (!device.is_cpu()) collectives = comm::communicator_for(comm, device);
    // Before the mesh splits it: every axis's communicator inherits the choice.
    collectives->set_hierarchy(comm::parse_hierarchy(options.hierarchical), options.intra_host_gbps,
                               options.inter_host_gbps);
    out.mesh = std::make_unique<DeviceMesh>(collectives, options.tp, options.pp);
    if (out.mesh->tp_size() > 1)
      out.tp_plan = TensorParallelPlan::apply(model, out.mesh->tp(), options.sequence_parallel);
    if (out.mesh->pp_size() > 1) {
      std::vector<int64_t> counts;
      std::stringstream list(options.pipeline_layers);
      for (std::string item; std::getline(list, item, ',');) {
        try {
          counts.push_back(std::stoll(item));
        } catch (const std::exception&) {
          return Status::invalid("parallel.pipeline_layers: '" + item + "' in \"" + options.pipeline_layers +
                                 "\" is not a block count");
        }
      }
      out.pipeline = std::make_unique<Pipeline>(
          model, out.mesh->pp(),
          PipelineLayout::make(model.num_blocks(), static_cast<int>(options.pp), static_cast<int>(options.virtual_stages),
                               counts),
          options.pipeline_schedule, options.sequence_parallel ? options.tp : 1);
    }
  }
  if (!out.pipeline) out.sequential = std::make_unique<SequentialRunner>(model);
  TRI_CHECK(device.is_cpu() || options.grad_compression == "none" || options.grad_compression == "bf16",
            "parallel.grad_compression = ", options.grad_compression, " runs on host tensors; train.device is ", device,
            " (bf16 compression runs anywhere)");
  // 4: what this rank kept moves to the device.
  if (!device.is_cpu()) model.to(device);
  // 5-6: precision and the update. ZeRO-Offload: the fp32 masters, their gradients and AdamW's
  // state live in host memory and AdamW steps there; the device keeps the compute-dtype
  // parameters. Under ZeRO the optimizer keeps the masters itself, sharded (offloaded too).
  const std::vector<nn::NamedTensor> params = out.pipeline ? out.pipeline->parameters() : model.named_parameters();
  const int64_t bucket_bytes = static_cast<int64_t>(options.bucket_mb * 1024 * 1024);
  if (options.zero_stage > 0) {
    TRI_CHECK(comm != nullptr, "parallel.zero_stage = ", options.zero_stage,
              " needs ranks to shard across: start the run with mpirun or trident launch");
    std::vector<std::vector<size_t>> parts;  // ZeRO-3: the model's parts as indices into params
    if (options.zero_stage == 3)
      for (const auto& part : model.parts()) {
        parts.emplace_back();
        for (const auto& [name, p] : part)
          parts.back().push_back(static_cast<size_t>(
              std::find_if(params.begin(), params.end(), [&](const nn::NamedTensor& q) { return q.first == name; }) -
              params.begin()));
      }
    auto zero = std::make_unique<ZeroOptimizer>(params, out.mesh->dp(), static_cast<int>(options.zero_stage),
                                                bucket_bytes, adamw, parts, precision.compute_dtype(),
                                                options.offload_optimizer, reducer_for(options, out.mesh->dp()));
    if (options.zero_stage == 3) model.set_part_hooks(zero.get());
    if (out.tp_plan || out.pipeline) {
      std::vector<bool> split;
      for (const auto& [name, p] : params) split.push_back(out.tp_plan && out.tp_plan->is_split(name));
      zero->set_model_parallel(out.tp_plan ? &out.mesh->tp() : nullptr, split,
                               out.pipeline ? &out.mesh->pp() : nullptr);
    }
    out.update = std::make_unique<ZeroUpdate>(params, std::move(zero));
  } else {
    std::unique_ptr<optim::MasterWeights> master;
    TRI_CHECK(options.grad_compression != "onebit_adam" || !precision.mixed(),
              "parallel.grad_compression = onebit_adam steps fp32 parameters; precision.dtype must be fp32");
    if (precision.mixed() || options.offload_optimizer)
      master = std::make_unique<optim::MasterWeights>(
          params, precision.compute_dtype(),
          options.offload_optimizer ? std::optional<Device>(Device::cpu()) : std::nullopt, bucket_bytes);
    // Data parallelism whenever there is a communicator, also with one rank (mpirun -np 1):
    // the same code path as with many.
    out.update = std::make_unique<ReplicatedUpdate>(
        params, std::move(master), out.mesh ? &out.mesh->dp() : nullptr, bucket_bytes, adamw, out.tp_plan.get(),
        out.tp_plan ? &out.mesh->tp() : nullptr, out.pipeline ? &out.mesh->pp() : nullptr, options);
  }
  // 7: the parameters are in the compute dtype now (MasterWeights or ZeRO switched them).
  if (out.pipeline && precision.mixed()) {
    out.pipeline->set_compute_dtype(precision.compute_dtype());
    // Rank 0 adds the head's gradient of a tied weight where that weight's gradient
    // accumulates in fp32.
    if (model.tied_head_weight())
      out.pipeline->set_head_gradient_sink(
          [u = out.update.get(), n = *model.tied_head_weight()](const Tensor& g) { u->add_grad(n, g); });
  }
  return out;
}

}  // namespace trident::parallel
