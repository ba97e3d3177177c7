#include "parallel/parallelize.h"

#include <algorithm>
#include <sstream>

#include "autograd/grad_mode.h"
#include "comm/device_communicator.h"
#include "core/allocator.h"
#include "core/copy.h"
#include "models/registry.h"
#include "parallel/expert_parallel.h"
#include "parallel/onebit_adam.h"
#include "parallel/pipeline.h"
#include "parallel/replicated_update.h"
#include "parallel/tensor_parallel.h"
#include "parallel/zero_update.h"

namespace trident::parallel {
namespace {

// parallel.pipeline_layers: block counts per chunk ("" = as even as possible).
StatusOr<std::vector<int64_t>> pipeline_block_counts(const std::string& text) {
  std::vector<int64_t> counts;
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');) {
    try {
      counts.push_back(std::stoll(item));
    } catch (const std::exception&) {
      return Status::invalid("parallel.pipeline_layers: '" + item + "' in \"" + text + "\" is not a block count");
    }
  }
  return counts;
}

}  // namespace

Parallelized::Parallelized() = default;
Parallelized::Parallelized(Parallelized&&) noexcept = default;
Parallelized& Parallelized::operator=(Parallelized&&) noexcept = default;
Parallelized::~Parallelized() = default;

MicroBatchRunner* Parallelized::runner() const {
  return pipeline ? static_cast<MicroBatchRunner*>(pipeline.get()) : sequential.get();
}

void check_layout(const ParallelOptions& options, int world_size) {
  const int64_t model_parallel = options.tp * options.pp;
  TRI_CHECK(world_size % model_parallel == 0, "parallel.tp (", options.tp, ") x parallel.pp (", options.pp,
            ") must divide the number of ranks (", world_size,
            "): start the run with mpirun or trident launch on a multiple of tp x pp ranks");
  TRI_CHECK(world_size % (model_parallel * options.ep) == 0, "parallel.ep (", options.ep, ") x parallel.tp (",
            options.tp, ") x parallel.pp (", options.pp, ") must divide the number of ranks (", world_size, ")");
  TRI_CHECK(options.ep == 1 || options.grad_compression == "none", "parallel.ep = ", options.ep,
            " with parallel.grad_compression = ", options.grad_compression,
            " is not supported: compressed gradients average one data-parallel group, expert parallelism reduces "
            "experts and dense parameters over different ones");
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
  if (options.offload_optimizer_device == "nvme") {
    TRI_CHECK(options.offload_optimizer && options.zero_stage > 0,
              "parallel.offload_optimizer_device = \"nvme\" keeps ZeRO's offloaded optimizer state on disk: it needs "
              "parallel.offload_optimizer = true and parallel.zero_stage 1-3 (got offload_optimizer = ",
              options.offload_optimizer ? "true" : "false", ", zero_stage = ", options.zero_stage, ")");
    TRI_CHECK(!options.nvme_path.empty(), "parallel.offload_optimizer_device = \"nvme\" needs parallel.nvme_path: "
                                          "a directory on a fast local disk for the optimizer state's files");
  }
  if (options.offload_param == "nvme") {
    TRI_CHECK(options.zero_stage == 3, "parallel.offload_param = \"nvme\" keeps ZeRO-3's parameter shard on disk: it "
                                       "needs parallel.zero_stage = 3 (got zero_stage = ", options.zero_stage, ")");
    TRI_CHECK(options.offload_optimizer,
              "parallel.offload_param = \"nvme\" needs parallel.offload_optimizer = true (offload_optimizer_device "
              "cpu or nvme): the tier's parameters are written from the fp32 masters the offloaded optimizer keeps "
              "apart, never read back to be stepped");
    TRI_CHECK(!options.nvme_path.empty(), "parallel.offload_param = \"nvme\" needs parallel.nvme_path: a directory "
                                          "on a fast local disk for the parameters' files");
  }
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

void check_layout(const models::ModelConfig& model, const ParallelOptions& options, int world_size, int64_t seq_len) {
  check_layout(options, world_size);
  if (options.ep > 1) {
    const int64_t experts = models::model_family(model.arch).shapes(model).experts;
    TRI_CHECK(experts > 0, "parallel.ep = ", options.ep,
              " splits a mixture of experts' experts; this model has none (model.num_local_experts = 0)");
    TRI_CHECK(experts % options.ep == 0, "parallel.ep (", options.ep, ") must divide the ", experts,
              " experts of each sparse layer (model.num_local_experts): each expert-parallel rank holds as many");
  }
  if (options.tp > 1) {
    models::model_family(model.arch).check_tensor_parallel(model, options.tp);
    TRI_CHECK(model.vocab_size >= options.tp, "tensor parallelism: model.vocab_size (", model.vocab_size,
              ") must be at least parallel.tp (", options.tp, "): each rank holds part of the vocabulary");
  }
  TRI_CHECK(!options.sequence_parallel || seq_len <= 0 || seq_len % options.tp == 0, "data.seq_len (", seq_len,
            ") must be divisible by parallel.tp (", options.tp, ") with parallel.sequence_parallel");
  if (options.pp > 1) {
    auto counts = pipeline_block_counts(options.pipeline_layers);
    TRI_CHECK(counts.is_ok(), counts.status().message());
    PipelineLayout::make(model.n_layer, static_cast<int>(options.pp), static_cast<int>(options.virtual_stages),
                         counts.value());
  }
}

StatusOr<Parallelized> parallelize(models::CausalLM& model, std::shared_ptr<comm::Communicator> comm, Device device,
                                   const ParallelOptions& options, const optim::PrecisionOptions& precision,
                                   const optim::AdamWOptions& adamw) {
  Parallelized out;
  std::vector<ParamSpec> specs;  // the logical shapes, before tensor parallelism shards them
  for (const auto& [name, p] : model.named_parameters())
    specs.push_back({name, p.shape(), model.block_of(name), Placement::replicate(), p.requires_grad(),
                     model.expert_of(name), model.num_experts()});
  // 1-3: the mesh, tensor parallelism, the pipeline.
  if (comm) {
    std::shared_ptr<comm::Communicator> collectives = comm;
    if (!device.is_cpu()) collectives = comm::communicator_for(comm, device);
    // Before the mesh splits it: every axis's communicator inherits the choice.
    collectives->set_hierarchy(comm::parse_hierarchy(options.hierarchical), options.intra_host_gbps,
                               options.inter_host_gbps);
    out.mesh = std::make_unique<DeviceMesh>(collectives,
                                            MeshShape::fill(collectives->size(), options.tp, options.pp, options.ep));
    if (out.mesh->tp_size() > 1)
      out.tp_plan = TensorParallelPlan::apply(model, out.mesh->tp(), options.sequence_parallel);
    if (out.mesh->pp_size() > 1) {
      auto counts = pipeline_block_counts(options.pipeline_layers);
      if (!counts.is_ok()) return counts.status();
      out.pipeline = std::make_unique<Pipeline>(
          model, out.mesh->pp(),
          PipelineLayout::make(model.num_blocks(), static_cast<int>(options.pp), static_cast<int>(options.virtual_stages),
                               counts.value()),
          options.pipeline_schedule, options.sequence_parallel ? options.tp : 1);
    }
  }
  // Expert parallelism: each ep rank keeps its experts and sends the others' rows away.
  comm::Communicator* ep = out.mesh && out.mesh->size(MeshAxis::kEP) > 1 ? &out.mesh->axis(MeshAxis::kEP) : nullptr;
  if (ep != nullptr) apply_expert_parallel(model, *ep);
  if (!out.pipeline) out.sequential = std::make_unique<SequentialRunner>(model);
  TRI_CHECK(device.is_cpu() || options.grad_compression == "none" || options.grad_compression == "bf16",
            "parallel.grad_compression = ", options.grad_compression, " runs on host tensors; train.device is ", device,
            " (bf16 compression runs anywhere)");
  // 4: the placement table.
  if (out.tp_plan)
    for (ParamSpec& s : specs)
      if (const std::optional<TensorSplit> split = out.tp_plan->split_of(s.name))
        s.tp = Placement::shard(split->dim, split->blocks);
  const DType compute = precision.compute_dtype();
  const Pipeline* pipeline = out.pipeline.get();
  out.placements = std::make_unique<PlacementTable>(PlacementTable::build(
      specs, out.mesh ? out.mesh->shape() : MeshShape{},
      [pipeline](int64_t block) { return pipeline->layout().stage_of_block(block); }, options.zero_stage, compute,
      compute));
  const PlacementTable& table = *out.placements;
  // 5: what this rank kept moves to the device.
  if (!device.is_cpu()) model.to(device);
  // 6-7: precision and the update. Frozen parameters take their storage dtype now; trainable
  // ones get fp32 masters (MasterWeights, or ZeRO's own, which switch them to the compute
  // dtype). ZeRO-Offload: the fp32 masters, their gradients and AdamW's state live in host
  // memory and AdamW steps there; the device keeps the compute-dtype parameters. Under ZeRO
  // the optimizer keeps the masters itself, sharded (offloaded too).
  {
    autograd::NoGradGuard no_grad;
    MemoryCategoryGuard params(MemoryCategory::kParameter);
    for (auto& [name, p] : model.named_parameters()) {
      const ParamPlacement& row = table.at(name);
      if (!row.trainable && p.numel() > 0 && p.dtype() != row.storage) p.set_data(core::cast(p, row.storage));
    }
  }
  std::vector<nn::NamedTensor> trainable;  // this rank's, in model order
  for (const auto& [name, p] : out.pipeline ? out.pipeline->parameters() : model.named_parameters()) {
    const ParamPlacement& row = table.at(name);
    if (row.on_ep_rank() && row.expert_rank() != out.mesh->rank(MeshAxis::kEP)) continue;  // another ep rank's expert
    if (row.trainable) trainable.emplace_back(name, p);
  }
  std::vector<ParamGroup> groups;
  for (const auto& [axes, names] : table.reduction_groups(out.stage())) {
    ParamGroup g{axes, out.mesh ? &out.mesh->group(axes) : nullptr, {}};
    for (const auto& named : trainable)
      if (std::find(names.begin(), names.end(), named.first) != names.end()) g.params.push_back(named);
    groups.push_back(std::move(g));
  }
  TRI_CHECK(table.trainable_numel() > 0, "every parameter is frozen (train.freeze): nothing would train");
  const int64_t bucket_bytes = static_cast<int64_t>(options.bucket_mb * 1024 * 1024);
  comm::Communicator* tp = out.tp_plan ? &out.mesh->tp() : nullptr;
  comm::Communicator* pp = out.pipeline ? &out.mesh->pp() : nullptr;
  if (options.zero_stage > 0) {
    TRI_CHECK(comm != nullptr, "parallel.zero_stage = ", options.zero_stage,
              " needs ranks to shard across: start the run with mpirun or trident launch");
    TRI_CHECK(options.grad_compression == "none" || groups.size() == 1, "parallel.grad_compression = ",
              options.grad_compression, " compresses one data-parallel group's gradients; this run reduces ",
              groups.size(), " groups");
    // One optimizer per reduction group, each sharding its parameters over its own ranks.
    std::vector<std::unique_ptr<ZeroOptimizer>> zeros;
    for (const ParamGroup& g : groups) {
      std::vector<std::vector<size_t>> parts;  // ZeRO-3: the model's parts as indices into g.params
      if (options.zero_stage == 3)
        for (const auto& part : model.parts()) {
          parts.emplace_back();
          for (const auto& [name, p] : part) {
            // &name = name: clang before 16 cannot capture a structured binding (fuzz/ builds with clang 14).
            const auto it =
                std::find_if(g.params.begin(), g.params.end(),
                             [&name = name](const nn::NamedTensor& q) { return q.first == name; });
            if (it != g.params.end()) parts.back().push_back(static_cast<size_t>(it - g.params.begin()));
          }
        }
      std::optional<zero::NvmeStateOptions> nvme;
      if (options.offload_optimizer && options.offload_optimizer_device == "nvme") {
        nvme = zero::NvmeStateOptions{
            options.nvme_path, static_cast<int>(options.nvme_buffer_count), static_cast<int>(options.nvme_queue_depth),
            std::max<int64_t>(1, static_cast<int64_t>(options.nvme_buffer_mb * (1 << 20) / 4))};
      }
      std::optional<zero::NvmeParamOptions> nvme_params;
      if (options.offload_param == "nvme") {
        nvme_params = zero::NvmeParamOptions{options.nvme_path, static_cast<int>(options.nvme_prefetch_depth),
                                             static_cast<int>(options.nvme_queue_depth)};
      }
      zeros.push_back(std::make_unique<ZeroOptimizer>(g.params, *g.comm, static_cast<int>(options.zero_stage),
                                                      bucket_bytes, adamw, parts, compute, options.offload_optimizer,
                                                      reducer_for(options, *g.comm), nvme, nvme_params));
      std::vector<bool> split;
      for (const auto& [name, p] : g.params) split.push_back(table.at(name).tp_split());
      zeros.back()->set_split(std::move(split));
    }
    auto zero = std::make_unique<ZeroUpdate>(std::move(zeros), tp, pp);
    if (ep != nullptr) {
      std::vector<bool> expert_groups;
      for (const ParamGroup& g : groups) expert_groups.push_back(!g.reduce_over.contains(MeshAxis::kEP));
      zero->set_expert_parallel(ep, std::move(expert_groups));
    }
    if (options.zero_stage == 3) model.set_part_hooks(zero.get());
    out.update = std::move(zero);
  } else {
    std::unique_ptr<optim::MasterWeights> master;
    TRI_CHECK(options.grad_compression != "onebit_adam" || !precision.mixed(),
              "parallel.grad_compression = onebit_adam steps fp32 parameters; precision.dtype must be fp32");
    std::vector<nn::NamedTensor> stepped;  // the groups' parameters, in group order
    for (const ParamGroup& g : groups) stepped.insert(stepped.end(), g.params.begin(), g.params.end());
    if (precision.mixed() || options.offload_optimizer)
      master = std::make_unique<optim::MasterWeights>(
          stepped, compute, options.offload_optimizer ? std::optional<Device>(Device::cpu()) : std::nullopt,
          bucket_bytes);
    // Data parallelism whenever there is a communicator, also with one rank (mpirun -np 1):
    // the same code path as with many.
    auto replicated = std::make_unique<ReplicatedUpdate>(std::move(groups), std::move(master), bucket_bytes, adamw,
                                                         &table, tp, pp, options);
    replicated->set_expert_parallel(ep);
    out.update = std::move(replicated);
  }
  // 8: the parameters are in the compute dtype now (MasterWeights or ZeRO switched them).
  if (out.pipeline && precision.mixed()) {
    out.pipeline->set_compute_dtype(compute);
    // Rank 0 adds the head's gradient of a tied weight where that weight's gradient
    // accumulates in fp32.
    if (model.tied_head_weight() && table.at(*model.tied_head_weight()).trainable)
      out.pipeline->set_head_gradient_sink(
          [u = out.update.get(), n = *model.tied_head_weight()](const Tensor& g) { u->add_grad(n, g); });
  }
  return out;
}

}  // namespace trident::parallel
