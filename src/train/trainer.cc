#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "autograd/functions.h"
#include "checkpoint/checkpoint_dir.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/views.h"
#include "core/parallel.h"
#include "models/gpt2/hf_names.h"
#include "optim/clip_grad.h"
#include "train/progress.h"

namespace trident::train {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<checkpoint::NamedTensor> to_checkpoint_list(const std::vector<nn::NamedTensor>& in) {
  std::vector<checkpoint::NamedTensor> out;
  out.reserve(in.size());
  for (const auto& [name, t] : in) out.push_back({name, t});
  return out;
}

// Copies `src` into parameter `dst` (shape-checked, dtype-converted) without recording.
Status assign(const std::string& what, const Tensor& dst, const Tensor& src) {
  if (!(src.shape() == dst.shape()))
    return Status::invalid(what + ": shape " + src.shape().str() + " does not match the model's " + dst.shape().str());
  autograd::NoGradGuard no_grad;
  core::copy_(dst, src);
  return Status::ok();
}

// Fields of [model] whose values differ between two configs, as "key: a vs b" lines.
std::string model_differences(const models::gpt2::GPT2Config& a, const models::gpt2::GPT2Config& b) {
  std::string diffs;
  for (const OptionField& f : models::gpt2::GPT2Config::table().fields()) {
    if (f.key == "activation_checkpointing") continue;  // how the model runs, not what it is
    const OptionValue va = f.get(&a), vb = f.get(&b);
    if (va != vb) diffs += "\n  model." + f.key + ": checkpoint " + option_value_str(va) + ", config " + option_value_str(vb);
  }
  return diffs;
}

}  // namespace

std::string config_to_toml(const TrainConfig& cfg) {
  TrainConfig copy = cfg;
  config::ConfigTree tree;
  copy.bind(tree);
  return tree.to_toml();
}

Status load_checkpoint_weights(const std::vector<nn::NamedTensor>& params, const checkpoint::CheckpointReader& r) {
  for (const auto& [name, p] : params) {
    auto t = r.load_tensor(name);
    if (!t.is_ok()) return t.status();
    Status s = assign(r.dir() + ": parameter '" + name + "'", p, t.value());
    if (!s.is_ok()) return s;
  }
  return Status::ok();
}

Status load_gpt2_weights(models::gpt2::GPT2& model, const std::string& path) {
  auto reader = checkpoint::SafetensorsReader::open(checkpoint::default_env(), path);
  if (!reader.is_ok()) return reader.status();
  std::map<std::string, Tensor> params;
  for (auto& [name, t] : model.named_parameters()) params.emplace(name, t);
  std::set<std::string> loaded;
  std::string unknown;
  for (const checkpoint::SafetensorsEntry& e : reader.value().entries()) {
    const std::optional<std::string> name = models::gpt2::parameter_name_from_hf(e.name);
    if (!name) continue;
    auto it = params.find(*name);
    if (it == params.end()) {
      unknown += (unknown.empty() ? "" : ", ") + e.name;
      continue;
    }
    auto t = reader.value().load(e.name);
    if (!t.is_ok()) return t.status();
    Status s = assign(path + ": tensor '" + e.name + "'", it->second, t.value());
    if (!s.is_ok()) return s;
    loaded.insert(*name);
  }
  if (!unknown.empty()) return Status::invalid(path + ": tensors that are not GPT-2 parameters: " + unknown);
  std::string missing;
  for (const auto& [name, t] : params)
    if (!loaded.count(name)) missing += (missing.empty() ? "" : ", ") + name;
  if (!missing.empty()) return Status::invalid(path + ": missing parameters: " + missing);
  return Status::ok();
}

Trainer::Trainer(const TrainConfig& cfg, std::shared_ptr<comm::Communicator> comm)
    : cfg_(cfg), comm_(std::move(comm)) {}

StatusOr<std::unique_ptr<Trainer>> Trainer::create(const TrainConfig& cfg, std::shared_ptr<comm::Communicator> comm) {
  cfg.validate();
  const int64_t model_parallel = cfg.parallel.tp * cfg.parallel.pp;
  TRI_CHECK(model_parallel == 1 || (comm && comm->size() % model_parallel == 0), "parallel.tp (", cfg.parallel.tp,
            ") x parallel.pp (", cfg.parallel.pp, ") must divide the number of ranks (", comm ? comm->size() : 1,
            "): start the run with mpirun or trident launch on a multiple of tp x pp ranks");
  TRI_CHECK(cfg.parallel.pp == 1 || cfg.parallel.zero_stage <= 1, "parallel.zero_stage = ", cfg.parallel.zero_stage,
            " with parallel.pp = ", cfg.parallel.pp, " is not supported; pipeline parallelism composes with ZeRO stages 0-1");
  TRI_CHECK(cfg.parallel.pp > 1 || (cfg.parallel.virtual_stages == 1 && cfg.parallel.pipeline_layers.empty()),
            "parallel.virtual_stages and parallel.pipeline_layers need parallel.pp > 1");
  TRI_CHECK(cfg.parallel.tp == 1 || cfg.parallel.zero_stage <= 2, "parallel.zero_stage = 3 with parallel.tp = ",
            cfg.parallel.tp, " is not supported; tensor parallelism composes with ZeRO stages 0-2");
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
    TRI_CHECK(!cfg.precision.mixed(), "precision.dtype = \"", cfg.precision.dtype,
              "\" is not supported with more than one rank yet; use fp32");
  }
  std::unique_ptr<Trainer> t(new Trainer(cfg, std::move(comm)));
  Status s = t->init();
  if (!s.is_ok()) return s;
  return t;
}

Status Trainer::init() {
  if (cfg_.train.threads > 0) set_num_threads(static_cast<int>(cfg_.train.threads));
  set_flush_denormals(cfg_.train.flush_denormals);
  {
    MemoryCategoryGuard params(MemoryCategory::kParameter);
    model_ = std::make_unique<models::gpt2::GPT2>(cfg_.model);
  }
  if (!cfg_.train.init_from.empty()) {
    Status s = load_gpt2_weights(*model_, cfg_.train.init_from);
    if (!s.is_ok()) return s;
  }
  for (const auto& [name, p] : model_->named_parameters()) full_shapes_.emplace(name, p.shape());
  if (comm_) {
    mesh_ = std::make_unique<parallel::DeviceMesh>(comm_, cfg_.parallel.tp, cfg_.parallel.pp);
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
  if (cfg_.precision.mixed())
    master_ = std::make_unique<optim::MasterWeights>(model_->named_parameters(), cfg_.precision.compute_dtype());
  scaler_ = std::make_unique<optim::DynamicLossScaler>(cfg_.precision);
  const int64_t bucket_bytes = static_cast<int64_t>(cfg_.parallel.bucket_mb * 1024 * 1024);
  if (cfg_.parallel.zero_stage > 0) {
    TRI_CHECK(comm_ != nullptr, "parallel.zero_stage = ", cfg_.parallel.zero_stage,
              " needs ranks to shard across: start the run with mpirun or trident launch");
    TRI_CHECK(!cfg_.precision.mixed(), "parallel.zero_stage > 0 supports precision.dtype = fp32 only for now");
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
                                                      bucket_bytes, cfg_.optim, parts);
    if (cfg_.parallel.zero_stage == 3) model_->set_part_hooks(zero_.get());
    if (tp_plan_ || pipeline_) {
      std::vector<bool> split;
      for (const auto& [name, p] : params) split.push_back(tp_plan_ && tp_plan_->is_split(name));
      zero_->set_model_parallel(tp_plan_ ? &mesh_->tp() : nullptr, split, pipeline_ ? &mesh_->pp() : nullptr);
    }
  } else {
    if (comm_)  // also with one rank (mpirun -np 1): the same code path as with many
      dp_ = std::make_unique<parallel::DataParallel>(weights(), mesh_->dp(), bucket_bytes);
    optimizer_ = std::make_unique<optim::AdamW>(weights(), cfg_.optim);
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
  auto val_file = data::TokenFile::open(cfg_.data.val_file);
  if (!val_file.is_ok()) return val_file.status();
  val_file_ = val_file.value();
  vs = val_file_->check_vocab_size(cfg_.model.vocab_size);
  if (!vs.is_ok()) return vs;

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
  if (!mesh_ || mesh_->dp_size() == 1) return batch;  // tensor-parallel peers share their rows
  const int64_t rows = batch.inputs.size(0) / mesh_->dp_size(), first = rows * mesh_->dp_rank();
  return {core::contiguous(views::narrow(batch.inputs, 0, first, rows)),
          core::contiguous(views::narrow(batch.targets, 0, first, rows))};
}

double Trainer::mean_over_ranks(double v) const {
  if (world_size() == 1) return v;
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
  if (pipeline_) {
    MemoryCategoryGuard activations(MemoryCategory::kActivation);
    std::vector<parallel::MicroBatch> micro;
    for (int64_t i = 0; i < accum; ++i) {
      const data::Batch batch = local_rows(train_sampler_->next());
      micro.push_back({batch.inputs, batch.targets});
    }
    loss_sum = pipeline_->train_step(micro, scaler_->scale() / static_cast<double>(accum), [&](bool last) {
      if (dp_) dp_->set_sync(last);  // a chunk's parameters are final at its last micro-batch
      if (zero_) zero_->begin_backward(last);
    });
    if (zero_) zero_->end_backward();
  } else {
    MemoryCategoryGuard activations(MemoryCategory::kActivation);
    for (int64_t micro = 0; micro < accum; ++micro) {
      const data::Batch batch = local_rows(train_sampler_->next());
      if (dp_) dp_->set_sync(micro == accum - 1);  // only the last micro-batch communicates
      if (zero_) zero_->begin_backward(micro == accum - 1);
      const Tensor loss = model_->loss(batch.inputs, batch.targets);
      loss_sum += loss.item();
      // The step's gradient is the mean over micro-batches (times the loss scale in fp16).
      const double seed = scaler_->scale() / static_cast<double>(accum);
      autograd::backward(seed == 1.0 ? loss : loss * seed);
      if (zero_) zero_->end_backward();
    }
  }
  if (dp_) dp_->finish();
  loss_sum = mean_over_ranks(loss_sum);
  StepMetrics m;
  bool apply = true;
  if (cfg_.precision.loss_scaling()) {
    m.loss_scale = scaler_->scale();
    const bool overflow = master_->grads_overflowed();
    apply = scaler_->update(overflow);
    m.skipped = !apply;
    m.skipped_steps = scaler_->skipped_steps();
    if (apply) master_->scale_grads(1.0 / *m.loss_scale);
  }
  const std::vector<nn::NamedTensor> w = weights();
  std::vector<Tensor> tensors;
  for (const auto& [name, t] : w) tensors.push_back(t);
  if (zero_) {
    m.grad_norm = zero_->clip_grad_norm(cfg_.optim.grad_clip);
    zero_->step(lr);
  } else if (apply) {
    m.grad_norm = tp_plan_ || pipeline_
                      ? parallel::clip_grad_norm_model_parallel(w, tp_plan_.get(), tp_plan_ ? &mesh_->tp() : nullptr,
                                                                pipeline_ ? &mesh_->pp() : nullptr, cfg_.optim.grad_clip)
                      : optim::clip_grad_norm_(tensors, cfg_.optim.grad_clip);
    optimizer_->step(lr);
    if (master_) master_->copy_to_model();
  } else {
    m.grad_norm = std::numeric_limits<double>::quiet_NaN();  // not measured: the gradients overflowed
  }
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

Status Trainer::run(int64_t until_step) {
  const int64_t last = until_step < 0 ? cfg_.train.steps : std::min(until_step, cfg_.train.steps);
  Status mk = is_rank0() ? checkpoint::create_dirs(checkpoint::default_env(), cfg_.train.out_dir) : Status::ok();
  if (!mk.is_ok()) return mk;
  // Rank 0 alone writes metrics and prints.
  auto metrics = MetricsWriter::open(is_rank0() ? cfg_.train.out_dir + "/metrics.jsonl" : "");
  const bool print = show_progress && is_rank0();
  if (!metrics.is_ok()) return metrics.status();
  Progress progress(cfg_.train.steps, cfg_.train.log_interval);
  const auto run_start = Clock::now();
  while (step_ < last) {
    StepMetrics m = train_step();
    m.elapsed_s = std::chrono::duration<double>(Clock::now() - run_start).count();
    metrics.value().write_step(m);
    if (print) progress.step(m);
    if (on_step) on_step(m);
    if (!std::isfinite(m.loss))
      return Status::error(ErrorKind::kValue, "training loss became " + std::to_string(m.loss) + " at step " +
                                                  std::to_string(m.step) + " (lr " + std::to_string(m.lr) + ")");
    const bool at_end = step_ == cfg_.train.steps;
    const int64_t ei = cfg_.train.eval_interval, ci = cfg_.train.checkpoint_interval;
    if ((ei > 0 && step_ % ei == 0) || at_end) {
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
      Status s = save_checkpoint();
      if (!s.is_ok()) return s;
    }
  }
  if (print) progress.finish();
  return Status::ok();
}

Status Trainer::save_checkpoint() {
  if (tp_plan_ || pipeline_) return save_model_parallel_checkpoint();
  if (zero_) return save_sharded_checkpoint();
  // One process, or data parallel: every rank holds the same state; rank 0 writes it, the
  // others wait.
  if (!is_rank0()) {
    comm_->barrier();
    return Status::ok();
  }
  Status saved = [&]() -> Status {
    checkpoint::Env* env = checkpoint::default_env();
    auto writer = checkpoint::CheckpointWriter::begin(env, cfg_.train.out_dir, checkpoint::step_checkpoint_name(step_));
    if (!writer.is_ok()) return writer.status();
    checkpoint::CheckpointWriter& w = writer.value();
    // "format": "pt" is what transformers' safetensors loader expects.
    Status s = w.write_safetensors("model.safetensors", to_checkpoint_list(weights()), {{"format", "pt"}});
    if (!s.is_ok()) return s;
    if (!(s = w.write_safetensors("optimizer.safetensors", to_checkpoint_list(optimizer_->state()))).is_ok()) return s;
    return commit_checkpoint(w, optimizer_->step_count());
  }();
  if (comm_ && world_size() > 1) comm_->barrier();
  return saved;
}

bool Trainer::all_ranks(bool ok) const {
  if (world_size() == 1) return ok;
  Tensor t = full({1}, ok ? 1.0 : 0.0, DType::kI64);
  comm_->all_reduce(t, comm::ReduceOp::kMin);
  return t.item() != 0.0;
}

// Note [Sharded checkpoints]
// Under ZeRO every rank writes what it owns, at once: rank r's partition of every parameter
// and of the AdamW state, as flat pieces of the logical tensors, into zero.rank<r>.safetensors
// inside the staging directory that rank 0 opened (so the ranks need a shared filesystem).
// Rank 0 then lists every rank's file (size and CRC-32C, which the ranks all-gather) and
// every piece in the manifest (checkpoint/manifest.h: flat shards; rank 0 knows each rank's
// layout), adds the trainer state and configs, and commits: the manifest and DONE are written
// last, so a crash leaves no checkpoint rather than part of one. Loading reads each rank's
// new partition through the manifest (CheckpointReader::load_flat_range), whatever rank count
// and stage wrote it; `trident export` consolidates the weights into one safetensors file.
Status Trainer::save_sharded_checkpoint() {
  const std::string name = checkpoint::step_checkpoint_name(step_);
  auto writer = begin_shared_checkpoint(name);
  if (!writer.is_ok()) return writer.status();
  std::vector<checkpoint::NamedTensor> tensors;
  for (const auto& p : zero_->pieces()) tensors.push_back({p.name, *p.values});
  auto files = write_shard_files(name, zero_shard_file(comm_->rank()), tensors, /*write=*/true);
  if (!files.is_ok()) return files.status();
  Status s = Status::ok();
  if (is_rank0()) {
    checkpoint::CheckpointWriter& w = *writer.value();
    for (int r = 0; r < world_size(); ++r) {
      checkpoint::ManifestFile f = files.value()[static_cast<size_t>(r)];
      f.name = zero_shard_file(r);
      w.add_file(f);
      for (const auto& p : zero_->pieces_of(r))
        w.add_tensor_shard(p.name, DType::kF32, p.shape,
                           checkpoint::TensorShard::flat(zero_shard_file(r), p.name, p.begin, p.end));
    }
    s = commit_checkpoint(w, zero_->step_count());
  }
  return agree_on(s, name);
}

std::string Trainer::zero_shard_file(int rank) {
  char file[64];
  std::snprintf(file, sizeof file, "zero.rank%05d.safetensors", rank);
  return file;
}

StatusOr<std::optional<checkpoint::CheckpointWriter>> Trainer::begin_shared_checkpoint(const std::string& name) {
  std::optional<checkpoint::CheckpointWriter> writer;
  Status s = Status::ok();
  if (is_rank0()) {
    auto w = checkpoint::CheckpointWriter::begin(checkpoint::default_env(), cfg_.train.out_dir, name);
    if (w.is_ok()) writer.emplace(std::move(w.value()));
    else s = w.status();
  }
  if (!all_ranks(s.is_ok()))
    return s.is_ok() ? Status::io_error("checkpoint " + name + ": rank 0 could not start it") : s;
  return writer;
}

StatusOr<std::vector<checkpoint::ManifestFile>> Trainer::write_shard_files(
    const std::string& name, const std::string& file, const std::vector<checkpoint::NamedTensor>& tensors, bool write) {
  checkpoint::Env* env = checkpoint::default_env();
  uint64_t size = 0;
  uint32_t crc = 0;
  Status s = Status::ok();
  if (write) {
    s = [&]() -> Status {
      auto out = checkpoint::AtomicFileWriter::create(
          env, checkpoint::join_path(checkpoint::staging_dir_for(cfg_.train.out_dir, name), file));
      if (!out.is_ok()) return out.status();
      Status w = checkpoint::write_safetensors(out.value(), tensors);
      if (!w.is_ok()) return w;
      size = out.value().size();
      crc = out.value().crc32c();
      return out.value().commit();
    }();
  }
  // Everyone learns whether every rank wrote its file, and each file's size and checksum.
  const int N = world_size();
  Tensor mine = from_vector(std::vector<int64_t>{s.is_ok() ? 1 : 0, static_cast<int64_t>(size), static_cast<int64_t>(crc)},
                            Shape{3});
  Tensor all = zeros({3 * static_cast<int64_t>(N)}, DType::kI64);
  comm_->all_gather(mine, all);
  const std::vector<int64_t> info = to_vector<int64_t>(all);
  std::vector<checkpoint::ManifestFile> files(static_cast<size_t>(N));
  for (int r = 0; r < N; ++r) {
    if (info[3 * r] == 0)
      return s.is_ok() ? Status::io_error("checkpoint " + name + ": rank " + std::to_string(r) + " could not write its shard")
                       : s;
    files[static_cast<size_t>(r)] = {"", static_cast<uint64_t>(info[3 * r + 1]), static_cast<uint32_t>(info[3 * r + 2])};
  }
  files[static_cast<size_t>(comm_->rank())].name = file;  // the others' names are the caller's to know
  return files;
}

Status Trainer::agree_on(const Status& rank0_status, const std::string& name) const {
  if (!all_ranks(rank0_status.is_ok()))
    return rank0_status.is_ok() ? Status::io_error("checkpoint " + name + ": rank 0 could not commit it") : rank0_status;
  return Status::ok();
}

// Note [Model-parallel checkpoints]
// Tensors keep their single-device names and shapes. The ranks of data-parallel group 0
// write: pipeline stage p, tensor-parallel rank t writes mp.pp<p>.tp<t>.safetensors holding,
// for every parameter of its stage and its AdamW moments, its shard as box shards of the full
// tensor (c_attn: three boxes, one in each of q, k and v); replicated tensors come whole from
// tp rank 0. Under ZeRO the moments are first gathered within the data-parallel group. Rank
// 0 lists every file and box in the manifest (it knows every stage's parameters and every
// rank's boxes) and commits, as for sharded ZeRO checkpoints; a reader assembles any tensor
// from its boxes, so the checkpoint loads under any other layout, or in one process.
Status Trainer::save_model_parallel_checkpoint() {
  const std::string name = checkpoint::step_checkpoint_name(step_);
  auto writer = begin_shared_checkpoint(name);
  if (!writer.is_ok()) return writer.status();
  const std::vector<nn::NamedTensor> opt_state = zero_ ? zero_->gather_state() : optimizer_->state();
  std::vector<nn::NamedTensor> tensors = weights();
  tensors.insert(tensors.end(), opt_state.begin(), opt_state.end());
  auto base_name = [](const std::string& n) {  // the parameter a tensor belongs to
    for (const char* suffix : {".exp_avg_sq", ".exp_avg"})
      if (n.ends_with(suffix)) return n.substr(0, n.size() - std::strlen(suffix));
    return n;
  };
  auto file_of = [](int p, int t) {
    char file[64];
    std::snprintf(file, sizeof file, "mp.pp%03d.tp%03d.safetensors", p, t);
    return std::string(file);
  };
  auto key_of = [](const std::string& n, size_t box) { return n + "#" + std::to_string(box); };
  const bool has_state = !opt_state.empty();
  auto split = [&](const std::string& param) { return tp_plan_ && tp_plan_->is_split(param); };
  // Pipeline stage s writes the tensors of its parameters; replicated ones come from tp rank 0.
  auto writes = [&](const std::string& param, int s, int t) {
    return (!pipeline_ || pipeline_->owner(param) == s) && (split(param) || t == 0);
  };
  auto boxes_of = [&](const std::string& param, int t) {
    return tp_plan_ ? tp_plan_->box_shapes(param, t)
                    : std::vector<std::pair<std::vector<int64_t>, Shape>>{
                          {std::vector<int64_t>(full_shapes_.at(param).size(), 0), full_shapes_.at(param)}};
  };
  const int pp = mesh_->pp_rank(), tp = mesh_->tp_rank();
  std::vector<checkpoint::NamedTensor> pieces;
  for (const auto& [n, t] : tensors) {
    const std::string param = base_name(n);
    if (!writes(param, pp, tp)) continue;
    if (!tp_plan_) {
      pieces.push_back({key_of(n, 0), t});
      continue;
    }
    const auto boxes = tp_plan_->boxes(param, t);
    for (size_t b = 0; b < boxes.size(); ++b) pieces.push_back({key_of(n, b), boxes[b].part});
  }
  auto files = write_shard_files(name, file_of(pp, tp), pieces, /*write=*/mesh_->dp_rank() == 0);
  if (!files.is_ok()) return files.status();
  Status s = Status::ok();
  if (is_rank0()) {
    checkpoint::CheckpointWriter& w = *writer.value();
    for (int p = 0; p < mesh_->pp_size(); ++p)
      for (int t = 0; t < mesh_->tp_size(); ++t) {
        checkpoint::ManifestFile f = files.value()[static_cast<size_t>(mesh_->rank_at(p, 0, t))];
        f.name = file_of(p, t);
        w.add_file(f);
        for (const auto& [param, shape] : full_shapes_) {
          if (!writes(param, p, t)) continue;
          for (const std::string& n : has_state ? std::vector<std::string>{param, param + ".exp_avg", param + ".exp_avg_sq"}
                                                : std::vector<std::string>{param}) {
            const auto boxes = boxes_of(param, t);
            for (size_t b = 0; b < boxes.size(); ++b)
              w.add_tensor_shard(n, DType::kF32, shape,
                                 checkpoint::TensorShard::box(file_of(p, t), key_of(n, b), boxes[b].first, boxes[b].second));
          }
        }
      }
    s = commit_checkpoint(w, zero_ ? zero_->step_count() : optimizer_->step_count());
  }
  return agree_on(s, name);
}

Status Trainer::commit_checkpoint(checkpoint::CheckpointWriter& w, int64_t optimizer_step) {
  const data::SamplerState sampler = train_sampler_->state();
  const Generator& gen = model_->dropout_generator();
  nlohmann::json state = {
      {"step", step_},
      {"optimizer_step", optimizer_step},
      {"sampler", {{"kind", cfg_.data.sampler}, {"seed", sampler.seed}, {"position", sampler.position}}},
      {"dropout_rng", {{"seed", gen.seed()}, {"offset", gen.offset()}}},
  };
  const optim::DynamicLossScaler::State ls = scaler_->state();
  state["loss_scaler"] = {{"scale", ls.scale},
                          {"growth_tracker", ls.growth_tracker},
                          {"hysteresis_left", ls.hysteresis_left},
                          {"skipped", ls.skipped}};
  Status s = Status::ok();
  if (!(s = w.write_file("trainer_state.json", state.dump(2) + "\n")).is_ok()) return s;
  if (!(s = w.write_file("config.toml", config_to_toml(cfg_))).is_ok()) return s;
  if (!(s = w.write_file("config.json", models::gpt2::hf_config_json(cfg_.model))).is_ok()) return s;
  auto done = w.commit();
  if (!done.is_ok()) return done.status();
  return checkpoint::prune_checkpoints(checkpoint::default_env(), cfg_.train.out_dir,
                                       static_cast<int>(cfg_.train.checkpoint_keep));
}

Status Trainer::load_checkpoint(const std::string& dir) {
  auto reader = checkpoint::CheckpointReader::open(checkpoint::default_env(), dir);
  if (!reader.is_ok()) return reader.status();
  const checkpoint::CheckpointReader& r = reader.value();

  // The architecture must match; other sections (steps, lr, ...) may change on resume.
  auto toml = r.read_file("config.toml");
  if (!toml.is_ok()) return toml.status();
  TrainConfig saved;
  config::ConfigTree tree;
  saved.bind(tree);
  Status s = tree.load_toml_string(toml.value(), dir + "/config.toml");
  if (!s.is_ok()) return s;
  const std::string diffs = model_differences(saved.model, cfg_.model);
  if (!diffs.empty()) return Status::invalid("checkpoint " + dir + " was trained with a different model:" + diffs);

  // A full tensor of the checkpoint as this rank holds it (its tensor-parallel shard).
  auto load_local = [&](const std::string& name, const std::string& param) -> StatusOr<Tensor> {
    auto t = r.load_tensor(name);
    if (!t.is_ok() || !tp_plan_) return t;
    if (!(t.value().shape() == tp_plan_->full_shape(param)))
      return Status::invalid(dir + ": tensor '" + name + "' has shape " + t.value().shape().str() + "; the model's is " +
                             tp_plan_->full_shape(param).str());
    return tp_plan_->local_from_full(param, t.value());
  };
  if (!zero_) {
    for (const auto& [name, p] : weights()) {
      auto t = load_local(name, name);
      if (!t.is_ok()) return t.status();
      if (!(s = assign(dir + ": parameter '" + name + "'", p, t.value())).is_ok()) return s;
    }
  }
  if (master_) master_->copy_to_model();
  auto state_text = r.read_file("trainer_state.json");
  if (!state_text.is_ok()) return state_text.status();
  nlohmann::json state;
  try {
    state = nlohmann::json::parse(state_text.value());
    const int64_t opt_step = state.at("optimizer_step").get<int64_t>();
    const std::string first = weights().front().first;
    const bool with_state = r.has_tensor(first + ".exp_avg");
    if (!with_state && opt_step > 0)
      return Status::invalid("checkpoint " + dir + " is at optimizer step " + std::to_string(opt_step) +
                             " but has no AdamW state ('" + first + ".exp_avg')");
    if (zero_) {
      // This rank's partition of each tensor, read from whichever pieces the writer left.
      try {
        zero_->load(
            [&](const std::string& name, int64_t begin, int64_t end) {
              if (tp_plan_) {  // this rank's shard of the tensor, then the range of it
                const std::string param = name.ends_with(".exp_avg_sq") ? name.substr(0, name.size() - 11)
                                          : name.ends_with(".exp_avg")  ? name.substr(0, name.size() - 8)
                                                                        : name;
                auto t = load_local(name, param);
                TRI_CHECK(t.is_ok(), t.status().to_string());
                return views::narrow(views::view(core::contiguous(t.value()), {t.value().numel()}), 0, begin, end - begin);
              }
              auto t = r.load_flat_range(name, begin, end);
              TRI_CHECK(t.is_ok(), t.status().to_string());
              return t.value();
            },
            with_state, opt_step);
      } catch (const Error& e) {
        return Status::invalid(e.what());
      }
    } else {
      std::vector<nn::NamedTensor> opt_state;
      for (auto& [name, p] : weights()) {
        for (const char* suffix : {".exp_avg", ".exp_avg_sq"}) {
          if (!with_state) continue;
          auto t = load_local(name + suffix, name);
          if (!t.is_ok()) return t.status();
          opt_state.emplace_back(name + suffix, t.value());
        }
      }
      optimizer_->load_state(opt_state, opt_step);
    }
    const auto& smp = state.at("sampler");
    if (smp.at("kind").get<std::string>() != cfg_.data.sampler)
      return Status::invalid("checkpoint " + dir + " used data.sampler = " + smp.at("kind").dump() + ", config has \"" +
                             cfg_.data.sampler + "\"");
    train_sampler_->restore({smp.at("seed").get<uint64_t>(), smp.at("position").get<int64_t>()});
    const auto& rng = state.at("dropout_rng");
    model_->dropout_generator().set_state(rng.at("seed").get<uint64_t>(), rng.at("offset").get<uint64_t>());
    step_ = state.at("step").get<int64_t>();
    if (state.contains("loss_scaler") && cfg_.precision.loss_scaling()) {
      const auto& ls = state.at("loss_scaler");
      scaler_->load_state({ls.at("scale").get<double>(), ls.at("growth_tracker").get<int64_t>(),
                           ls.at("hysteresis_left").get<int64_t>(), ls.at("skipped").get<int64_t>()});
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::invalid(dir + "/trainer_state.json: " + e.what());
  }
  return Status::ok();
}

}  // namespace trident::train
