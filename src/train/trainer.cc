#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "autograd/functions.h"
#include "comm/device_communicator.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/views.h"
#include "core/parallel.h"
#include "core/profiler.h"
#include "models/registry.h"
#include "optim/clip_grad.h"
#include "train/progress.h"
#include "train/step_profile.h"
#include "train/stop_request.h"

namespace trident::train {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

std::string config_to_toml(const TrainConfig& cfg) {
  TrainConfig copy = cfg;
  config::ConfigTree tree;
  copy.bind(tree);
  return tree.to_toml();
}

Trainer::Trainer(const TrainConfig& cfg, std::shared_ptr<comm::Communicator> comm, Device device)
    : cfg_(cfg), comm_(std::move(comm)), device_(device) {}

StatusOr<std::unique_ptr<Trainer>> Trainer::create(const TrainConfig& cfg, std::shared_ptr<comm::Communicator> comm,
                                                   std::optional<Device> device) {
  cfg.validate();
  if (!device && cfg.train.device == "cuda") {
    TRI_CHECK_NOT_IMPLEMENTED(device_allocator(DeviceType::kCUDA) != nullptr,
                              "train.device = \"cuda\": this build has no CUDA backend (configure with "
                              "-DTRIDENT_CUDA=ON on a machine with the CUDA toolkit)");
    device = Device::cuda();  // this process's GPU: NCCL's setup picks it from the local rank
  }
  const int64_t model_parallel = cfg.parallel.tp * cfg.parallel.pp;
  TRI_CHECK(model_parallel == 1 || (comm && comm->size() % model_parallel == 0), "parallel.tp (", cfg.parallel.tp,
            ") x parallel.pp (", cfg.parallel.pp, ") must divide the number of ranks (", comm ? comm->size() : 1,
            "): start the run with mpirun or trident launch on a multiple of tp x pp ranks");
  TRI_CHECK(cfg.parallel.pp == 1 || cfg.parallel.zero_stage <= 1, "parallel.zero_stage = ", cfg.parallel.zero_stage,
            " with parallel.pp = ", cfg.parallel.pp, " is not supported; pipeline parallelism composes with ZeRO stages 0-1");
  TRI_CHECK(cfg.parallel.pp > 1 || (cfg.parallel.virtual_stages == 1 && cfg.parallel.pipeline_layers.empty()),
            "parallel.virtual_stages and parallel.pipeline_layers need parallel.pp > 1");
  TRI_CHECK(!cfg.parallel.sequence_parallel || cfg.parallel.tp > 1,
            "parallel.sequence_parallel needs parallel.tp > 1 (it splits the tensor-parallel ranks' sequence)");
  TRI_CHECK(!cfg.parallel.sequence_parallel || cfg.data.seq_len % cfg.parallel.tp == 0, "data.seq_len (",
            cfg.data.seq_len, ") must be divisible by parallel.tp (", cfg.parallel.tp, ") with parallel.sequence_parallel");
  if (comm && comm->size() > 1) {
    const int64_t dp = comm->size() / model_parallel;
    TRI_CHECK(cfg.data.batch_size % dp == 0, "data.batch_size (", cfg.data.batch_size,
              ") must be divisible by the number of data-parallel ranks (", dp, " = ", comm->size(), " ranks / (tp ",
              cfg.parallel.tp, " x pp ", cfg.parallel.pp, ")): each data-parallel rank trains on an equal slice of every "
              "global batch");
  }
  TRI_CHECK(!cfg.parallel.offload_optimizer || cfg.parallel.zero_stage > 0 || ((!comm || comm->size() == 1) && model_parallel == 1),
            "parallel.offload_optimizer with several ranks needs ZeRO (parallel.zero_stage 1-3, as DeepSpeed's "
            "ZeRO-Offload): ", comm ? comm->size() : 1, " ranks, tp ", cfg.parallel.tp, ", pp ", cfg.parallel.pp,
            ", zero_stage 0 requested");
  std::unique_ptr<Trainer> t(new Trainer(cfg, std::move(comm), device.value_or(Device::cpu())));
  Status s = t->init();
  if (!s.is_ok()) return s;
  return t;
}

Status Trainer::init() {
  if (cfg_.train.threads > 0) set_num_threads(static_cast<int>(cfg_.train.threads));
  // The GEMM engines before any GEMM; the config (and checkpoints) name them, not "auto".
  cfg_.kernels = cfg_.kernels.resolved(cfg_.uses_bf16_gemms());
  cfg_.kernels.apply(cfg_.uses_bf16_gemms());
  set_flush_denormals(cfg_.train.flush_denormals);
  {
    MemoryCategoryGuard params(MemoryCategory::kParameter);
    model_ = models::build_model(cfg_.model);
  }
  if (!cfg_.train.init_from.empty()) {
    Status s = load_hf_weights(*model_, cfg_.train.init_from);
    if (!s.is_ok()) return s;
  }
  for (const auto& [name, p] : model_->named_parameters()) full_shapes_.emplace(name, p.shape());
  if (comm_) {
    // The mesh's collectives take tensors where the parameters live. NCCL's setup also picks
    // this process's GPU, so it comes before the model moves there.
    std::shared_ptr<comm::Communicator> collectives = comm_;
    if (!device_.is_cpu()) collectives = comm::communicator_for(comm_, device_);
    mesh_ = std::make_unique<parallel::DeviceMesh>(collectives, cfg_.parallel.tp, cfg_.parallel.pp);
    if (mesh_->tp_size() > 1)
      tp_plan_ = parallel::TensorParallelPlan::apply(*model_, mesh_->tp(), cfg_.parallel.sequence_parallel);
    if (mesh_->pp_size() > 1) {
      std::vector<int64_t> counts;
      std::stringstream list(cfg_.parallel.pipeline_layers);
      for (std::string item; std::getline(list, item, ',');) {
        try {
          counts.push_back(std::stoll(item));
        } catch (const std::exception&) {
          return Status::invalid("parallel.pipeline_layers: '" + item + "' in \"" + cfg_.parallel.pipeline_layers +
                                 "\" is not a block count");
        }
      }
      pipeline_ = std::make_unique<parallel::Pipeline>(
          *model_, mesh_->pp(),
          parallel::PipelineLayout::make(cfg_.model.n_layer, static_cast<int>(cfg_.parallel.pp),
                                         static_cast<int>(cfg_.parallel.virtual_stages), counts),
          cfg_.parallel.pipeline_schedule, cfg_.parallel.sequence_parallel ? cfg_.parallel.tp : 1);
    }
  }
  if (!device_.is_cpu()) model_->to(device_);  // after tensor parallelism took this rank's slices
  // ZeRO-Offload: the fp32 masters, their gradients and AdamW's state live in host memory and
  // AdamW steps there; the device keeps the compute-dtype parameters. Under ZeRO the optimizer
  // keeps the masters itself, sharded (offloaded too).
  if ((cfg_.precision.mixed() || cfg_.parallel.offload_optimizer) && cfg_.parallel.zero_stage == 0)
    master_ = std::make_unique<optim::MasterWeights>(
        pipeline_ ? pipeline_->parameters() : model_->named_parameters(), cfg_.precision.compute_dtype(),
        cfg_.parallel.offload_optimizer ? std::optional<Device>(Device::cpu()) : std::nullopt);
  scaler_ = std::make_unique<optim::DynamicLossScaler>(cfg_.precision);
  const int64_t bucket_bytes = static_cast<int64_t>(cfg_.parallel.bucket_mb * 1024 * 1024);
  if (cfg_.parallel.zero_stage > 0) {
    TRI_CHECK(comm_ != nullptr, "parallel.zero_stage = ", cfg_.parallel.zero_stage,
              " needs ranks to shard across: start the run with mpirun or trident launch");
    const std::vector<nn::NamedTensor> params = weights();
    std::vector<std::vector<size_t>> parts;  // ZeRO-3: the model's parts as indices into params
    if (cfg_.parallel.zero_stage == 3)
    for (const auto& part : model_->parts()) {
      parts.emplace_back();
      for (const auto& [name, p] : part)
        parts.back().push_back(static_cast<size_t>(
            std::find_if(params.begin(), params.end(), [&](const nn::NamedTensor& q) { return q.first == name; }) -
            params.begin()));
    }
    zero_ = std::make_unique<parallel::ZeroOptimizer>(params, mesh_->dp(), static_cast<int>(cfg_.parallel.zero_stage),
                                                      bucket_bytes, cfg_.optim, parts, cfg_.precision.compute_dtype(),
                                                      cfg_.parallel.offload_optimizer);
    if (cfg_.parallel.zero_stage == 3) model_->set_part_hooks(zero_.get());
    if (tp_plan_ || pipeline_) {
      std::vector<bool> split;
      for (const auto& [name, p] : params) split.push_back(tp_plan_ && tp_plan_->is_split(name));
      zero_->set_model_parallel(tp_plan_ ? &mesh_->tp() : nullptr, split, pipeline_ ? &mesh_->pp() : nullptr);
    }
  } else {
    if (comm_)  // also with one rank (mpirun -np 1): the same code path as with many
      // Mixed precision: the fp32 masters' gradients are averaged (MasterWeights fills them,
      // not autograd, so the buckets are filled after the backward), and the model's
      // compute-dtype copies follow rank 0's masters.
      dp_ = std::make_unique<parallel::DataParallel>(weights(), mesh_->dp(), bucket_bytes, master_ == nullptr);
    if (dp_ && master_) master_->copy_to_model();
    optimizer_ = std::make_unique<optim::AdamW>(weights(), cfg_.optim);
  }
  // The parameters are in the compute dtype now (MasterWeights or ZeRO switched them).
  if (pipeline_ && cfg_.precision.mixed()) {
    pipeline_->set_compute_dtype(cfg_.precision.compute_dtype());
    // Rank 0 adds the head's gradient of a tied weight where that weight's gradient accumulates in fp32.
    if (const std::optional<std::string> tied = model_->tied_head_weight(); tied) {
      if (zero_) pipeline_->set_head_gradient_sink([z = zero_.get(), n = *tied](const Tensor& g) { z->add_grad(n, g); });
      else pipeline_->set_head_gradient_sink([w = master_.get(), n = *tied](const Tensor& g) { w->add_grad(n, g); });
    }
  }
  schedule_ = std::make_unique<optim::LRSchedule>(cfg_.lr_schedule, cfg_.optim.lr, cfg_.train.steps);

  auto train_file = data::TokenFile::open(cfg_.data.train_file);
  if (!train_file.is_ok()) return train_file.status();
  Status vs = train_file.value()->check_vocab_size(cfg_.model.vocab_size);
  if (!vs.is_ok()) return vs;
  const int64_t B = cfg_.data.batch_size, T = cfg_.data.seq_len;
  if (cfg_.data.sampler == "sequential") {
    train_sampler_ = std::make_unique<data::SequentialSampler>(train_file.value(), B, T);
  } else {
    train_sampler_ = std::make_unique<data::RandomSampler>(train_file.value(), B, T,
                                                           static_cast<uint64_t>(cfg_.data.seed));
  }
  // No validation file (`prepare --val-fraction 0`): training runs without evaluation, and
  // run() says so. A file that exists but cannot be read is still an error.
  std::error_code ec;
  if (cfg_.data.val_file.empty()) {
    no_validation_reason_ = "data.val_file is empty";
  } else if (!std::filesystem::exists(cfg_.data.val_file, ec)) {
    if (ec) return Status::io_error("cannot look for data.val_file '" + cfg_.data.val_file + "': " + ec.message());
    no_validation_reason_ = "data.val_file '" + cfg_.data.val_file + "' does not exist";
  } else {
    auto val_file = data::TokenFile::open(cfg_.data.val_file);
    if (!val_file.is_ok()) return val_file.status();
    val_file_ = val_file.value();
    vs = val_file_->check_vocab_size(cfg_.model.vocab_size);
    if (!vs.is_ok()) return vs;
  }
  // Evaluation is collective: a rank that skipped it would pair its next collective with the
  // others' evaluation. So every rank must see the file, or none.
  if (const bool all = all_ranks(val_file_ != nullptr), none = all_ranks(val_file_ == nullptr); !all && !none)
    return Status::invalid("data.val_file '" + cfg_.data.val_file + "' exists on some ranks' hosts and not on others (" +
                           (val_file_ ? "this rank has it" : "this rank has not") +
                           "): put it on a filesystem every rank sees, or set data.val_file = \"\"");

  if (cfg_.train.resume) {
    auto latest = checkpoint::find_latest_checkpoint(checkpoint::default_env(), cfg_.train.out_dir);
    if (!latest.is_ok()) return latest.status();
    if (latest.value().has_value()) return load_checkpoint(*latest.value());
  }
  return Status::ok();
}

int64_t Trainer::num_model_parameters() const {
  int64_t n = 0;
  for (const auto& [name, shape] : full_shapes_) n += shape.product();
  return n;
}

std::vector<nn::NamedTensor> Trainer::weights() const {
  if (master_) return master_->masters();
  return pipeline_ ? pipeline_->parameters() : model_->named_parameters();
}

data::Batch Trainer::local_rows(const data::Batch& batch) const {
  if (!mesh_ || mesh_->dp_size() == 1)  // tensor-parallel peers share their rows
    return {core::to_device(batch.inputs, device_), core::to_device(batch.targets, device_)};
  const int64_t rows = batch.inputs.size(0) / mesh_->dp_size(), first = rows * mesh_->dp_rank();
  return {core::to_device(core::contiguous(views::narrow(batch.inputs, 0, first, rows)), device_),
          core::to_device(core::contiguous(views::narrow(batch.targets, 0, first, rows)), device_)};
}

double Trainer::mean_over_ranks(double v) const {
  if (world_size() == 1) return v;
  profiler::ProfileScope scope("train.all_reduce", profiler::Phase::kCommunication);
  Tensor t = full({1}, v, DType::kF64);
  comm_->all_reduce(t);
  return t.item() / static_cast<double>(world_size());
}

StepMetrics Trainer::train_step() {
  const auto start = Clock::now();
  const int64_t comm_bytes_before = mesh_ ? mesh_->total_bytes() : 0;
  const double lr = schedule_->lr_at(step_);
  const int64_t accum = cfg_.data.grad_accum_steps;
  double loss_sum = 0.0;
  auto next_batch = [&] {
    profiler::ProfileScope scope("data.next_batch", profiler::Phase::kData);
    return local_rows(train_sampler_->next());
  };
  if (pipeline_) {
    MemoryCategoryGuard activations(MemoryCategory::kActivation);
    std::vector<parallel::MicroBatch> micro;
    for (int64_t i = 0; i < accum; ++i) {
      const data::Batch batch = next_batch();
      micro.push_back({batch.inputs, batch.targets});
    }
    loss_sum = pipeline_->train_step(micro, scaler_->scale() / static_cast<double>(accum), [&](bool last) {
      if (dp_) dp_->set_sync(last);  // a chunk's parameters are final at its last micro-batch
      if (zero_) zero_->begin_backward(last);
    });
    if (master_) master_->finish_backward();
    if (zero_) zero_->end_backward();
  } else {
    MemoryCategoryGuard activations(MemoryCategory::kActivation);
    for (int64_t micro = 0; micro < accum; ++micro) {
      const data::Batch batch = next_batch();
      if (dp_) dp_->set_sync(micro == accum - 1);  // only the last micro-batch communicates
      if (zero_) zero_->begin_backward(micro == accum - 1);
      const Tensor loss = model_->loss(batch.inputs, batch.targets);
      loss_sum += loss.item();
      // The step's gradient is the mean over micro-batches (times the loss scale in fp16).
      const double seed = scaler_->scale() / static_cast<double>(accum);
      autograd::backward(seed == 1.0 ? loss : loss * seed);
      if (master_) master_->finish_backward();
      if (zero_) zero_->end_backward();
    }
  }
  if (dp_) dp_->finish();
  loss_sum = mean_over_ranks(loss_sum);
  StepMetrics m;
  if (cfg_.precision.loss_scaling()) m.loss_scale = scaler_->scale();
  if (zero_) {
    // ZeRO unscales fp16's gradients while it measures their norm; a non-finite norm is an
    // overflow. Every rank decides alike: the replicated parameters' squares are not summed
    // over tensor parallelism, so the norm need not be bit-identical across its ranks.
    m.grad_norm = zero_->clip_grad_norm(cfg_.optim.grad_clip, scaler_->scale());
    const bool apply = !cfg_.precision.loss_scaling() || scaler_->update(!all_ranks(std::isfinite(m.grad_norm)));
    if (apply) {
      zero_->step(lr);
    } else {
      zero_->skip_step();
      m.grad_norm = std::numeric_limits<double>::quiet_NaN();  // not measured: the gradients overflowed
    }
    m.skipped = !apply;
  } else {
    bool apply = true;
    if (cfg_.precision.loss_scaling()) {
      // Under tensor parallelism each rank holds other slices: the step is skipped if any
      // rank's gradients overflowed, so every rank decides the same.
      apply = scaler_->update(!all_ranks(!master_->grads_overflowed()));
      m.skipped = !apply;
      if (apply) master_->scale_grads(1.0 / *m.loss_scale);
    }
    const std::vector<nn::NamedTensor> w = weights();
    std::vector<Tensor> tensors;
    for (const auto& [name, t] : w) tensors.push_back(t);
    if (apply) {
      m.grad_norm = tp_plan_ || pipeline_
                        ? parallel::clip_grad_norm_model_parallel(w, tp_plan_.get(), tp_plan_ ? &mesh_->tp() : nullptr,
                                                                  pipeline_ ? &mesh_->pp() : nullptr, cfg_.optim.grad_clip)
                        : optim::clip_grad_norm_(tensors, cfg_.optim.grad_clip);
      if (master_) {
        master_->step(*optimizer_, lr);
      } else {
        optimizer_->step(lr);
      }
    } else {
      m.grad_norm = std::numeric_limits<double>::quiet_NaN();  // not measured: the gradients overflowed
    }
  }
  if (cfg_.precision.loss_scaling()) m.skipped_steps = scaler_->skipped_steps();
  model_->zero_grad();
  if (master_) master_->zero_grads();
  ++step_;
  m.step = step_;
  m.loss = loss_sum / static_cast<double>(accum);
  m.lr = lr;
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  m.tokens_per_s = static_cast<double>(cfg_.tokens_per_step()) / seconds;
  if (mesh_) m.comm_bytes = mesh_->total_bytes() - comm_bytes_before;
  return m;
}

double Trainer::evaluate() {
  TRI_CHECK(val_file_ != nullptr, "no validation data to evaluate on: ", no_validation_reason_);
  autograd::NoGradGuard no_grad;
  MemoryCategoryGuard activations(MemoryCategory::kActivation);
  model_->eval();
  data::SequentialSampler val(val_file_, cfg_.data.batch_size, cfg_.data.seq_len);
  if (pipeline_) {
    std::vector<parallel::MicroBatch> batches;
    for (int64_t i = 0; i < cfg_.train.eval_batches; ++i) {
      const data::Batch batch = local_rows(val.batch_at(i));
      batches.push_back({batch.inputs, batch.targets});
    }
    const double total = pipeline_->evaluate(batches);
    model_->train();
    return mean_over_ranks(total / static_cast<double>(cfg_.train.eval_batches));
  }
  double total = 0.0;
  for (int64_t i = 0; i < cfg_.train.eval_batches; ++i) {
    const data::Batch batch = local_rows(val.batch_at(i));
    total += model_->loss(batch.inputs, batch.targets).item();
  }
  model_->train();
  return mean_over_ranks(total / static_cast<double>(cfg_.train.eval_batches));
}

// Note [Preemption]
// A run stops early, with a checkpoint, when any rank is sent SIGTERM, SIGINT or SIGUSR1
// (train/stop_request.h) or when train.max_runtime would run out. Only step boundaries are
// safe: inside a step the ranks are in collectives that every one of them must finish. So
// the handlers only record the signal, and before each step every rank contributes what it
// has seen to one scalar all-reduce; the answer is the same on every rank, even when the
// signal reached only one of them or the ranks' clocks disagree about the budget. Then all
// of them write the checkpoint (a collective of its own) and return, and the CLI exits with
// kExitStoppedEarly (75). A signal that arrives mid-step lets that step finish; a signal
// during a checkpoint lets it finish too. Resuming reads the checkpoint like any other, so
// the losses continue as if the run had never stopped (tests/train/preemption_test.py).
//
// The time budget counts from the process's start and is checked ahead: the run stops at the
// first boundary where the elapsed time plus the slowest iteration so far (step, evaluation
// and periodic checkpoint) plus the last checkpoint's write time would pass it, so the
// process is gone before a scheduler's hard limit (Megatron's --exit-duration-in-mins checks
// only the elapsed time). Every process makes at least one step before the budget can stop
// it: a requeued job always progresses.
std::string Trainer::agree_on_stop() const {
  // Each rank's request: the signal it received, kBudget for the time budget, or 0. One
  // scalar all-reduce (max) of request x ranks + (ranks - 1 - rank) tells every rank the
  // largest request and the lowest rank that made it.
  constexpr int64_t kBudget = 1000;
  int64_t request = stop_signal();
  const double budget = cfg_.train.max_runtime_seconds();
  if (request == 0 && budget > 0 && steps_this_process_ > 0) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - process_start_time()).count();
    if (elapsed + longest_iteration_s_ + last_checkpoint_s_ > budget) request = kBudget;
  }
  const int64_t ranks = world_size(), rank = comm_ ? comm_->rank() : 0;
  int64_t agreed = request == 0 ? 0 : request * ranks + (ranks - 1 - rank);
  if (ranks > 1) {
    Tensor t = full({1}, static_cast<double>(agreed), DType::kI64);
    comm_->all_reduce(t, comm::ReduceOp::kMax);
    agreed = static_cast<int64_t>(t.item());
  }
  if (agreed == 0) return "";
  const int64_t code = agreed / ranks, who = ranks - 1 - agreed % ranks;
  const std::string why = code == kBudget ? "train.max_runtime = \"" + cfg_.train.max_runtime + "\" would run out"
                                          : std::string(stop_signal_name(static_cast<int>(code))) + " received";
  return ranks > 1 ? why + " on rank " + std::to_string(who) : why;
}

Status Trainer::run(int64_t until_step) {
  const int64_t last = until_step < 0 ? cfg_.train.steps : std::min(until_step, cfg_.train.steps);
  stop_reason_.clear();
  Status mk = is_rank0() ? checkpoint::create_dirs(checkpoint::default_env(), cfg_.train.out_dir) : Status::ok();
  if (!mk.is_ok()) return mk;
  // Rank 0 alone writes metrics and prints.
  auto metrics = MetricsWriter::open(is_rank0() ? cfg_.train.out_dir + "/metrics.jsonl" : "");
  const bool print = show_progress && is_rank0();
  if (!metrics.is_ok()) return metrics.status();
  Progress progress(cfg_.train.steps, cfg_.train.log_interval);
  if (print && !val_file_) progress.message("evaluation is off: " + no_validation_reason_);
  if (print && !engines_note_.empty()) progress.message(engines_note_);
  if (print && cfg_.train.profile_step > 0 && cfg_.train.profile_step <= step_)
    progress.message("train.profile_step = " + std::to_string(cfg_.train.profile_step) + ": already done (resumed at step " +
                     std::to_string(step_) + "), no profile");
  if (cfg_.train.mfu && !mfu_) {  // train/mfu.h: every rank measures its own ceiling (collective)
    if (device_.is_cpu()) {
      mfu_ = measure_mfu_ceiling(cfg_, num_model_parameters(), cfg_.data.batch_size / (mesh_ ? mesh_->dp_size() : 1));
      mfu_->total_ceiling_gflops = mean_over_ranks(mfu_->ceiling_gflops) * world_size();
    }
    if (print)
      progress.message(mfu_ ? mfu_->summary()
                            : "train.mfu: not measured on " + device_.str() + " (the ceiling is a CPU's GEMMs)");
  }
  // A checkpoint, timed for the budget (Note [Preemption]).
  auto checkpoint = [&]() -> Status {
    const auto start = Clock::now();
    Status s = save_checkpoint();
    if (!s.is_ok()) return s;
    last_checkpoint_s_ = std::chrono::duration<double>(Clock::now() - start).count();
    last_checkpoint_step_ = step_;
    return s;
  };
  const auto run_start = Clock::now();
  while (step_ < last) {
    if (std::string why = agree_on_stop(); !why.empty()) {
      if (print) progress.message("stopping after step " + std::to_string(step_) + " of " +
                                  std::to_string(cfg_.train.steps) + ": " + why);
      if (step_ > last_checkpoint_step_) {
        Status s = checkpoint();
        if (!s.is_ok()) return s;
      }
      stop_reason_ = why;
      return Status::ok();
    }
    const auto iteration_start = Clock::now();
    std::optional<profiler::ProfileSession> profile;  // train.profile_step (train/step_profile.h)
    if (step_ + 1 == cfg_.train.profile_step) profile.emplace();
    StepMetrics m = train_step();
    if (profile)
      report_step_profile(profile->stop(), cfg_.train.out_dir, step_, comm_ ? comm_->rank() : 0, world_size(),
                          print ? &progress : nullptr);
    if (mfu_) m.mfu = mfu_->mfu(m.tokens_per_s);
    ++steps_this_process_;
    m.elapsed_s = std::chrono::duration<double>(Clock::now() - run_start).count();
    metrics.value().write_step(m);
    if (print) progress.step(m);
    if (on_step) on_step(m);
    if (!std::isfinite(m.loss))
      return Status::error(ErrorKind::kValue, "training loss became " + std::to_string(m.loss) + " at step " +
                                                  std::to_string(m.step) + " (lr " + std::to_string(m.lr) + ")");
    const bool at_end = step_ == cfg_.train.steps;
    const int64_t ei = cfg_.train.eval_interval, ci = cfg_.train.checkpoint_interval;
    if (val_file_ && ((ei > 0 && step_ % ei == 0) || at_end)) {
      const double val = evaluate();
      metrics.value().write_eval(step_, val);
      if (print) {
        char line[128];
        std::snprintf(line, sizeof line, "step %lld: val_loss %.4f (ppl %.2f)", static_cast<long long>(step_), val,
                      std::exp(val));
        progress.message(line);
      }
      if (on_eval) on_eval(step_, val);
    }
    if ((ci > 0 && step_ % ci == 0) || at_end) {
      Status s = checkpoint();
      if (!s.is_ok()) return s;
    }
    longest_iteration_s_ =
        std::max(longest_iteration_s_, std::chrono::duration<double>(Clock::now() - iteration_start).count());
  }
  if (print) progress.finish();
  return Status::ok();
}

}  // namespace trident::train
