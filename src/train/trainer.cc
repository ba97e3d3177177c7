#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <filesystem>
#include <sstream>
#include <thread>

#include "autograd/functions.h"
#include "comm/device_communicator.h"
#include "comm/string_collectives.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/views.h"
#include "core/parallel.h"
#include "core/profiler.h"
#include "models/registry.h"
#include "nn/freeze.h"
#include "ops/documents.h"
#include "parallel/parallelize.h"
#include "data/prepare.h"
#include "train/hf_model_dir.h"
#include "optim/clip_grad.h"
#include "train/progress.h"
#include "train/run_lock.h"
#include "train/step_profile.h"
#include "train/tokenizer_factory.h"
#include "train/stop_request.h"

namespace trident::train {
namespace {

using Clock = std::chrono::steady_clock;

// Bytes of the newest complete checkpoint in `out_dir` (0 when there is none or it cannot be read).
int64_t checkpoint_bytes(const std::string& out_dir) {
  auto latest = checkpoint::find_latest_checkpoint(checkpoint::default_env(), out_dir);
  if (!latest.is_ok() || !latest.value()) return 0;
  std::error_code ec;
  int64_t bytes = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(*latest.value(), ec))
    if (e.is_regular_file(ec)) bytes += static_cast<int64_t>(e.file_size(ec));
  return bytes;
}

}  // namespace

std::string config_to_toml(const TrainConfig& cfg) {
  TrainConfig copy = cfg;
  config::ConfigTree tree;
  copy.bind(tree);
  return tree.to_toml();
}

Trainer::Trainer(const TrainConfig& cfg, std::shared_ptr<comm::Communicator> comm, Device device)
    : cfg_(cfg), comm_(std::move(comm)), device_(device) {}

StatusOr<std::unique_ptr<Trainer>> Trainer::create(const TrainConfig& config,
                                                   std::shared_ptr<comm::Communicator> comm,
                                                   std::optional<Device> device) {
  // A Hugging Face directory in train.init_from gives the architecture (train/hf_model_dir.h).
  TrainConfig cfg = config;
  if (Status s = resolve_init_from(cfg); !s.is_ok()) return s;
  cfg.validate();
  if (!device && cfg.train.device == "cuda") {
    TRI_CHECK_NOT_IMPLEMENTED(device_allocator(DeviceType::kCUDA) != nullptr,
                              "train.device = \"cuda\": this build has no CUDA backend (configure with "
                              "-DTRIDENT_CUDA=ON on a machine with the CUDA toolkit)");
    device = Device::cuda();  // this process's GPU: NCCL's setup picks it from the local rank
  }
  check_layout(cfg, comm ? comm->size() : 1);
  std::unique_ptr<Trainer> t(new Trainer(cfg, std::move(comm), device.value_or(Device::cpu())));
  Status s = t->init();
  if (!s.is_ok()) return s;
  return t;
}

void Trainer::check_layout(const TrainConfig& cfg, int ranks) {
  parallel::check_layout(cfg.model, cfg.parallel, ranks, cfg.data.seq_len);
  const int64_t dp = ranks / (cfg.parallel.tp * cfg.parallel.pp);
  TRI_CHECK(ranks == 1 || cfg.data.batch_size % dp == 0, "data.batch_size (", cfg.data.batch_size,
            ") must be divisible by the number of data-parallel ranks (", dp, " = ", ranks, " ranks / (tp ",
            cfg.parallel.tp, " x pp ", cfg.parallel.pp, ")): each data-parallel rank trains on an equal slice of every "
            "global batch");
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
  nn::freeze_parameters(*model_, cfg_.train.freeze, "train.freeze");
  if (Status s = apply_adapters(); !s.is_ok()) return s;
  // Every strategy, in the order of Note [The order of strategies] (parallel/parallelize.h).
  auto par = parallel::parallelize(*model_, comm_, device_, cfg_.parallel, cfg_.precision, cfg_.optim);
  if (!par.is_ok()) return par.status();
  par_ = std::move(par.value());
  mesh_ = par_.mesh.get();
  runner_ = par_.runner();
  update_ = par_.update.get();
  if (Status s = quantize_base(); !s.is_ok()) return s;
  // The strategies copied the model's own parameters into their buffers (ZeRO's flat or
  // sharded parameters, mixed precision's compute copies, a quantized base) and freed them.
  // Give those blocks back to the system now: cached, they would sit beside the gradients and
  // state the first step allocates, in other sizes, and a run sized to its memory (the NVMe
  // tier's) would hold its parameters twice.
  host_allocator().empty_cache();
  scaler_ = std::make_unique<optim::DynamicLossScaler>(cfg_.precision);
  schedule_ = std::make_unique<optim::LRSchedule>(cfg_.lr_schedule, cfg_.optim.lr, cfg_.train.steps);

  // Note [Publishing train.bin and val.bin together]: not a pair that is half published.
  if (Status s = data::pending_prepare_error(cfg_.data.train_file, "data.train_file"); !s.is_ok()) return s;
  if (!cfg_.data.val_file.empty())
    if (Status s = data::pending_prepare_error(cfg_.data.val_file, "data.val_file"); !s.is_ok()) return s;
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
  if (cfg_.data.document_masking) {
    if (cfg_.data.end_of_document >= 0) {
      end_of_document_ = cfg_.data.end_of_document;
    } else {
      auto tokenizer = make_tokenizer(cfg_.data.tokenizer, cfg_.data.vocab_dir);
      if (!tokenizer.is_ok())
        return Status::invalid("data.document_masking = true ends documents at the tokenizer's end-of-text token: " +
                               tokenizer.status().message() + " (or set data.end_of_document to the token id)");
      end_of_document_ = tokenizer.value()->eot_id();
      if (!end_of_document_)
        return Status::invalid("data.document_masking = true needs a token that ends documents; data.tokenizer '" +
                               cfg_.data.tokenizer + "' has no end-of-text token: set data.end_of_document");
    }
  }
  // A loss mask beside the token file (instruction and chat data: data/loss_mask.h).
  auto train_mask = data::LossMask::open_beside(cfg_.data.train_file, train_file.value()->size());
  if (!train_mask.is_ok()) return train_mask.status();
  train_sampler_->set_loss_mask(train_mask.value());
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
    auto val_mask = data::LossMask::open_beside(cfg_.data.val_file, val_file_->size());
    if (!val_mask.is_ok()) return val_mask.status();
    val_mask_ = val_mask.value();
    vs = val_file_->check_vocab_size(cfg_.model.vocab_size);
    if (!vs.is_ok()) return vs;
    // Found now, not at the first evaluation: that came after the last step and lost the run.
    if (val_file_->size() < T + 1)
      return Status::invalid("data.val_file '" + cfg_.data.val_file + "' has " + std::to_string(val_file_->size()) +
                             " tokens, fewer than one window of data.seq_len + 1 = " + std::to_string(T + 1) +
                             ": use more validation data, a shorter data.seq_len, or data.val_file = \"\" to train "
                             "without evaluation");
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
    // Step directories without a DONE marker (a write cut short) are passed over; say which,
    // so that a run that starts over from an older step, or from step 0, does not do so silently.
    auto incomplete = checkpoint::incomplete_after_latest(checkpoint::default_env(), cfg_.train.out_dir);
    if (!incomplete.is_ok()) return incomplete.status();
    std::string skipped;
    for (const std::string& name : incomplete.value()) skipped += (skipped.empty() ? "" : ", ") + name;
    // Said whenever a run resumes: a restarted job's log tells where each attempt began.
    if (!skipped.empty())
      resume_note_ = cfg_.train.out_dir + ": skipped " + skipped + " (incomplete: no DONE marker); " +
                     (latest.value() ? "resuming " + *latest.value() : std::string("starting from step 0"));
    else if (latest.value())
      resume_note_ = "resuming " + *latest.value();
    if (latest.value().has_value()) return load_checkpoint(*latest.value());
  }
  return Status::ok();
}

parallel::MicroBatch Trainer::micro_batch(const data::Batch& batch) const {
  const data::Batch local = local_rows(batch);
  parallel::MicroBatch mb{local.inputs, local.targets, std::nullopt};
  if (end_of_document_)
    mb.documents = ops::documents_from_positions(ops::positions_after(local.inputs, *end_of_document_), device_);
  return mb;
}

data::Batch Trainer::local_rows(const data::Batch& batch) const {
  if (!mesh_ || mesh_->dp_size() == 1)  // tensor-parallel peers share their rows
    return {core::to_device(batch.inputs, device_), core::to_device(batch.targets, device_)};
  const int64_t rows = batch.inputs.size(0) / mesh_->dp_size(), first = rows * mesh_->dp_rank();
  return {core::to_device(core::contiguous(views::narrow(batch.inputs, 0, first, rows)), device_),
          core::to_device(core::contiguous(views::narrow(batch.targets, 0, first, rows)), device_)};
}

double Trainer::mean_over_ranks(double v, bool* any) const {
  if (world_size() == 1) return v;
  profiler::ProfileScope scope("train.all_reduce", profiler::Phase::kCommunication);
  // With `any`: a second element, 1 where it was set, rides on the same all-reduce.
  Tensor t = any != nullptr ? from_vector(std::vector<double>{v, *any ? 1.0 : 0.0}, Shape{2}) : full({1}, v, DType::kF64);
  comm_->all_reduce(t);
  if (any != nullptr) *any = to_vector<double>(t)[1] > 0.0;
  return to_vector<double>(t)[0] / static_cast<double>(world_size());
}

// Note [Auxiliary values over ranks]
// Each rank's model records its own auxiliary values (nn/aux_outputs.h), and ranks may record
// different names: a pipeline stage only its blocks' (a router's loss per layer), a stage
// without such layers none. After the step every rank sends its sums and counts per name as a
// little JSON (comm::all_gather_strings) and adds them up by name, so a name's mean is over
// every micro-batch and rank that recorded it: data-parallel replicas' values are means over
// their own rows, tensor-parallel peers repeat the same value (which leaves the mean alone).
// Most runs record nothing: whether any rank has values rides on the loss's all-reduce (a
// second element), so those runs make no collective of their own and send no text. The text
// goes after the step's byte counters are read: comm_bytes stays what the step's training
// moved, and metrics lines without aux values are unchanged. The per-layer sums
// (tokens per expert) travel the same way, as a second text.
std::map<std::string, double> Trainer::aux_means(const nn::AuxValues& mine, bool any_rank) {
  if (world_size() == 1) return merge_aux_values({aux_values_to_json(mine)});
  if (!any_rank) return {};
  profiler::ProfileScope scope("train.aux_values", profiler::Phase::kCommunication);
  return merge_aux_values(comm::all_gather_strings(*comm_, aux_values_to_json(mine)));
}

std::vector<MoeLayerMetrics> Trainer::moe_layers_over_ranks(const nn::AuxLayerSums& mine, bool any_rank) {
  // Tensor-parallel peers route the same tokens: one of them counts (Note [Tokens per expert]).
  const std::string text = layer_sums_to_json(mesh_ && mesh_->tp_rank() != 0 ? nn::AuxLayerSums{} : mine);
  if (world_size() == 1) return merge_moe_layers({text});
  if (!any_rank) return {};
  profiler::ProfileScope scope("train.aux_values", profiler::Phase::kCommunication);
  return merge_moe_layers(comm::all_gather_strings(*comm_, text));
}

StepMetrics Trainer::train_step() {
  const auto start = Clock::now();
  const int64_t comm_bytes_before = mesh_ ? mesh_->total_bytes() : 0;
  const std::pair<int64_t, int64_t> sent_before = mesh_ ? mesh_->link_bytes() : std::pair<int64_t, int64_t>{0, 0};
  const std::optional<parallel::UpdateStrategy::TierTraffic> tier_before = update_->tier_traffic();
  const double lr = schedule_->lr_at(step_);
  const int64_t accum = cfg_.data.grad_accum_steps;
  double loss_sum = 0.0;
  // The step's phases (StepMetrics), timed at the seams every strategy shares.
  auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  double data_s = 0.0;
  auto next_batch = [&] {
    profiler::ProfileScope scope("data.next_batch", profiler::Phase::kData);
    return micro_batch(train_sampler_->next());
  };
  // The step's gradient is the mean over micro-batches (times the loss scale in fp16).
  double seed = scaler_->scale() / static_cast<double>(accum);
  double forward_backward_s = 0.0;
  bool poisoned = false;  // a test's injected NaN (train/fault_injection.h)
  {
    MemoryCategoryGuard activations(MemoryCategory::kActivation);
    std::vector<parallel::MicroBatch> micro;
    for (int64_t i = 0; i < accum; ++i) {
      if (faults_ != nullptr)  // a test's injected fault (train/fault_injection.h)
        poisoned = faults_->before_batch(train_sampler_->position(), comm_ ? comm_->rank() : 0) || poisoned;
      const auto t = Clock::now();
      micro.push_back(next_batch());  // built and copied
      data_s += since(t);
    }
    if (train_sampler_->loss_mask()) weigh_by_trained_tokens(micro);
    if (poisoned) seed = std::numeric_limits<double>::quiet_NaN();
    // Aux losses start their backward from the same seed (Note [Auxiliary losses and the loss
    // seed] in nn/aux_outputs.cc); values from forwards outside a step (evaluation) are dropped.
    (void)model_->aux_outputs().take();
    (void)model_->aux_outputs().take_layer_sums();
    model_->aux_outputs().set_loss_seed(seed);
    const auto t = Clock::now();
    loss_sum = runner_->train(micro, seed, *update_);
    if (poisoned) loss_sum = std::numeric_limits<double>::quiet_NaN();
    forward_backward_s = since(t);
  }
  const auto comm_start = Clock::now();
  update_->finish_backward();
  // The step's auxiliary values are all recorded (its forwards are done); whether any rank has
  // some travels with the loss (Note [Auxiliary values over ranks]).
  const nn::AuxValues aux = model_->aux_outputs().take();
  const nn::AuxLayerSums layer_sums = model_->aux_outputs().take_layer_sums();
  bool any_aux = !aux.empty() || !layer_sums.empty();
  loss_sum = mean_over_ranks(loss_sum, &any_aux);
  StepMetrics m;
  m.comm_wait_s = since(comm_start);
  m.data_s = data_s;
  m.forward_backward_s = forward_backward_s;
  const auto optimizer_start = Clock::now();
  const bool loss_scaling = cfg_.precision.loss_scaling();
  if (loss_scaling) m.loss_scale = scaler_->scale();
  const parallel::StepOutcome outcome = update_->step(
      {lr, cfg_.optim.grad_clip, scaler_.get(), loss_scaling, [this](bool ok) { return all_ranks(ok); }});
  m.grad_norm = outcome.grad_norm;
  m.skipped = outcome.skipped;
  if (loss_scaling) m.skipped_steps = scaler_->skipped_steps();
  model_->zero_grad();
  update_->zero_grads();
  m.optimizer_s = since(optimizer_start);
  ++step_;
  m.step = step_;
  m.loss = loss_sum / static_cast<double>(accum);
  m.lr = lr;
  const double seconds = since(start);
  m.step_s = seconds;
  m.tokens_per_s = static_cast<double>(cfg_.tokens_per_step()) / seconds;
  if (mesh_) {
    m.comm_bytes = mesh_->total_bytes() - comm_bytes_before;
    const std::pair<int64_t, int64_t> sent = mesh_->link_bytes();
    m.comm_sent_bytes = (sent.first - sent_before.first) + (sent.second - sent_before.second);
  }
  if (const auto tier = update_->tier_traffic(); tier && tier_before)
    m.nvme = StepMetrics::NvmeTraffic{tier->read_bytes - tier_before->read_bytes,
                                      tier->written_bytes - tier_before->written_bytes,
                                      tier->wait_s - tier_before->wait_s};
  m.aux = aux_means(aux, any_aux);  // after the step's counters: Note [Auxiliary values over ranks]
  m.moe_layers = moe_layers_over_ranks(layer_sums, any_aux);
  return m;
}

double Trainer::evaluate() {
  TRI_CHECK(val_file_ != nullptr, "no validation data to evaluate on: ", no_validation_reason_);
  autograd::NoGradGuard no_grad;
  MemoryCategoryGuard activations(MemoryCategory::kActivation);
  model_->eval();
  data::SequentialSampler val(val_file_, cfg_.data.batch_size, cfg_.data.seq_len);
  val.set_loss_mask(val_mask_);
  std::vector<parallel::MicroBatch> batches;
  for (int64_t i = 0; i < cfg_.train.eval_batches; ++i) {
    batches.push_back(micro_batch(val.batch_at(i)));
  }
  if (val_mask_) weigh_by_trained_tokens(batches);
  const double total = runner_->evaluate(batches);
  model_->train();
  return mean_over_ranks(total / static_cast<double>(cfg_.train.eval_batches));
}

// Note [Steps over masked tokens]
// With a loss mask (instruction and chat data, data/loss_mask.h) micro-batches hold different
// numbers of trained tokens, and one may hold none (a window inside a long prompt): the mean of
// per-micro-batch means would weigh a token of a nearly empty micro-batch as much as a whole
// other one, and an empty one's mean is 0/0. So the step's loss is the mean over every trained
// token of the step, on every rank (Hugging Face's num_items_in_batch): micro-batch i of the
// rank weighs accum x dp x count_i / G, G the data-parallel group's trained tokens in the step
// (one all-reduce; tensor and pipeline peers hold the same rows and are divided out), so that
// the runners' weighted sums, averaged over ranks and divided by accum, are sum count_i loss_i
// / G, and the gradient its gradient. A micro-batch without trained tokens weighs 0 and adds
// nothing. Without a mask every weight is 1 and nothing changes.
void Trainer::weigh_by_trained_tokens(std::vector<parallel::MicroBatch>& micro) const {
  std::vector<double> counts;
  double local = 0;
  for (const parallel::MicroBatch& mb : micro) {
    double n = 0;
    for (int64_t t : to_vector<int64_t>(mb.targets)) n += t != -1 ? 1 : 0;
    counts.push_back(n);
    local += n;
  }
  const int replicas = mesh_ ? mesh_->dp_size() : 1;
  const double global = mean_over_ranks(local) * world_size() / (world_size() / replicas);
  for (size_t i = 0; i < micro.size(); ++i)
    micro[i].weight = global > 0 ? counts[i] * static_cast<double>(micro.size()) * replicas / global : 0.0;
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
Trainer::Boundary Trainer::agree_at_boundary(bool idle) {
  // Each rank's request: the signal it received, kBudget for the time budget, or 0. One
  // scalar all-reduce (max) of request x ranks + (ranks - 1 - rank) tells every rank the
  // largest request and the lowest rank that made it.
  constexpr int64_t kBudget = 1000;
  int64_t request = stop_signal();
  const double budget = cfg_.train.max_runtime_seconds();
  if (!idle && request == 0 && budget > 0 && steps_this_process_ > 0) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - process_start_time()).count();
    if (elapsed + longest_iteration_s_ + last_checkpoint_s_ > budget) request = kBudget;
  }
  const int64_t ranks = world_size(), rank = comm_ ? comm_->rank() : 0;
  int64_t agreed = request == 0 ? 0 : request * ranks + (ranks - 1 - rank);
  Boundary out;
  monitor::RunControl* control = monitor_ ? monitor_->control() : nullptr;
  int64_t word = control ? control->take_requests(&out.control_reason) : 0;
  if (ranks > 1) {
    // See Note [Control at step boundaries]: rank 0's word rides on the stop all-reduce, and
    // the per-rank values of Note [Rank slots].
    const int64_t fields = rank_fields();
    std::vector<int64_t> v(static_cast<size_t>(2 + fields * ranks), 0);
    v[0] = agreed;
    v[1] = word;
    if (fields > 0) {
      v[static_cast<size_t>(2 + rank)] = static_cast<int64_t>(std::llround(last_busy_s_ * 1e6));
      // ppm + 1, so that 0 (another rank's slot, or not measured) stays apart from 0%.
      const double mem[2] = {monitor_ ? monitor_->host_memory_ratio() : std::nan(""),
                             monitor_ ? monitor_->device_memory_ratio() : std::nan("")};
      for (int64_t f = 1; f < fields; ++f)
        if (std::isfinite(mem[f - 1])) v[static_cast<size_t>(2 + f * ranks + rank)] = std::llround(mem[f - 1] * 1e6) + 1;
    }
    Tensor t = from_vector<int64_t>(v, {static_cast<int64_t>(v.size())});
    if (idle) {
      std::unique_ptr<comm::Work> w = comm_->all_reduce_async(t, comm::ReduceOp::kMax);
      while (!w->test()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    } else {
      comm_->all_reduce(t, comm::ReduceOp::kMax);
    }
    agreed = t.data_ptr<int64_t>()[0];
    word = t.data_ptr<int64_t>()[1];
    if (fields > 0 && !idle && step_ > 0 && monitor_) {
      const int64_t* got = t.data_ptr<int64_t>();
      monitor::StepCondition::RankSample sample;
      for (int64_t r = 0; r < ranks; ++r) {
        sample.busy_s.push_back(1e-6 * static_cast<double>(got[2 + r]));
        const int64_t m = fields > 1 ? got[2 + ranks + r] : 0, d = fields > 2 ? got[2 + 2 * ranks + r] : 0;
        sample.memory_ratio.push_back(m > 0 ? 1e-6 * static_cast<double>(m - 1) : std::nan(""));
        sample.device_memory_ratio.push_back(d > 0 ? 1e-6 * static_cast<double>(d - 1) : std::nan(""));
      }
      monitor_->on_ranks(step_, sample);
    }
  }
  if (ranks == 1 && rank_fields() > 0 && !idle && step_ > 0 && monitor_)  // one process: its own values
    monitor_->on_ranks(step_, {{last_busy_s_}, {monitor_->host_memory_ratio()}, {monitor_->device_memory_ratio()}});
  out.control = static_cast<uint32_t>(word);
  if (agreed == 0) return out;
  const int64_t code = agreed / ranks, who = ranks - 1 - agreed % ranks;
  const std::string why = code == kBudget ? "train.max_runtime = \"" + cfg_.train.max_runtime + "\" would run out"
                                          : std::string(stop_signal_name(static_cast<int>(code))) + " received";
  out.stop_reason = ranks > 1 ? why + " on rank " + std::to_string(who) : why;
  return out;
}

// Note [Rank slots]
// Some rules need a value from every rank: the straggler rule each rank's busy time, the
// memory rule each rank's host memory and device memory. When such a rule exists (every rank's
// config says so alike), the boundary all-reduce (max) grows from 2 int64 to 2 + fields x
// ranks, each rank writing only its own slots, so every rank learns every rank's values in
// the message the boundary already sends: busy microseconds, then host memory used and the
// device allocator's share of its limit, each in ppm + 1 (0: not measured). Rank 0's rules judge them after step S; their actions go out at the boundary
// after step S + 1, on every rank alike.
//
// Note [Straggler times]
// A straggler is a rank slower than its peers at its own work. Its step time says nothing
// (in a synchronous step every rank waits for the slowest), so each rank reports its step
// time minus its communication wait after backward (StepMetrics::comm_wait_s), in
// microseconds, in its own slot of the boundary all-reduce (Note [Rank slots]). Rank 0's rule
// compares them with their median; its actions go out at the next boundary. Waits inside forward and backward (tensor and pipeline
// parallelism's blocking collectives) still count as busy: the rule is for data parallelism.
int Trainer::rank_fields() const {
  bool any = false, memory = false;
  for (const monitor::AlertRule& r : cfg_.alerts) {
    any = any || r.condition == "straggler" || r.condition == "memory_high";
    memory = memory || r.condition == "memory_high";
  }
  return memory ? 3 : any ? 1 : 0;
}

// Note [Control at step boundaries]
// Pause, resume, checkpoint and stop (POST /pause etc., and the alert rules' actions) must
// happen at the same step on every rank: a rank that pauses while another starts the next
// step leaves that one alone in a collective. Only rank 0 takes requests (its RunControl),
// and its request bits travel in the all-reduce every boundary already makes for the stop
// signals (Note [Preemption]): the tensor grows from one int64 to two, no extra message.
// Ranks other than 0 contribute 0, so the max is rank 0's word.
//
// A paused run holds every rank at the boundary. Rank 0 sleeps on its RunControl's condition
// variable (woken by a request, or after 200 ms); then all ranks make the boundary's
// all-reduce again, as a non-blocking operation polled every 5 ms with sleeps in between, so
// no rank spins a core or sits in a blocking MPI call long enough for the communicator's
// timeout (comm/mpi_communicator.h) to fire, and a SIGTERM to any rank still stops the run
// with a checkpoint. Pausing changes no state, so a paused and resumed run computes the
// losses of one never paused (tests/train/run_control_test.cc).
StatusOr<Trainer::Boundary> Trainer::hold_paused(const std::string& why, const std::function<Status()>& checkpoint) {
  monitor_->set_state("paused", why);
  monitor::RunControl* control = monitor_->control();
  while (true) {
    if (control) control->wait_for_request(std::chrono::milliseconds(200));
    Boundary b = agree_at_boundary(/*idle=*/true);
    if (!b.stop_reason.empty() || (b.control & monitor::kControlStop)) return b;
    if ((b.control & monitor::kControlCheckpoint) && step_ > last_checkpoint_step_) {
      if (Status s = checkpoint(); !s.is_ok()) return s;
    }
    if (b.control & monitor::kControlResume) {
      monitor_->set_state("running", b.control_reason);
      return Boundary{};
    }
  }
}

Status Trainer::run(int64_t until_step) {
  const int64_t last = until_step < 0 ? cfg_.train.steps : std::min(until_step, cfg_.train.steps);
  stop_reason_.clear();
  stopped_by_rule_ = diverged_ = false;
  Status mk = is_rank0() ? checkpoint::create_dirs(checkpoint::default_env(), cfg_.train.out_dir) : Status::ok();
  if (!mk.is_ok()) return mk;
  // One run per out_dir (Note [The out_dir lock] in train/run_lock.cc): rank 0 takes it, every
  // rank learns the outcome, a refused run stops before writing anything. Then the metrics
  // file is trimmed to the step this run starts from (Note [Metrics on resume] in metrics.cc).
  std::optional<StatusOr<RunLock>> run_lock;
  if (is_rank0()) run_lock.emplace(RunLock::acquire(cfg_.train.out_dir));
  if (!all_ranks(!run_lock || run_lock->is_ok()))
    return run_lock && !run_lock->is_ok() ? run_lock->status()
                                          : Status::invalid("rank 0 could not lock train.out_dir '" +
                                                            cfg_.train.out_dir + "' (its error says why)");
  if (is_rank0() && !monitor_) {
    auto reconciled = reconcile_metrics(cfg_.train.out_dir + "/metrics.jsonl", step_);
    if (!reconciled.is_ok()) return reconciled.status();
  }
  // Rank 0 alone writes metrics and prints.
  auto metrics = MetricsWriter::open(is_rank0() ? cfg_.train.out_dir + "/metrics.jsonl" : "");
  const bool print = show_progress && is_rank0();
  if (!metrics.is_ok()) return metrics.status();
  if (!monitor_) {
    auto m = RunMonitor::start(cfg_, comm_ ? comm_->rank() : 0, mesh_, device_);
    if (!m.is_ok()) return m.status();
    monitor_ = std::move(m.value());
    if (faults_ != nullptr) faults_->at_start(comm_ ? comm_->rank() : 0);
  }
  if (!saved_alert_state_.is_null()) {  // Note [Alert state in checkpoints]
    try {
      monitor_->restore_alert_state(saved_alert_state_);
    } catch (const Error& e) {
      return Status::invalid(std::string("the checkpoint resumed from: ") + e.what());
    }
    saved_alert_state_ = nullptr;
  }
  monitor_->set_state("running");
  Progress progress(cfg_.train.steps, cfg_.train.log_interval);
  if (print && !val_file_) progress.message("evaluation is off: " + no_validation_reason_);
  if (print && !resume_note_.empty()) progress.message(resume_note_);
  if (print && !engines_note_.empty()) progress.message(engines_note_);
  if (print && step_ >= cfg_.train.steps)  // a finished run resumed: say so rather than exit in silence
    progress.message("the checkpoint is at step " + std::to_string(step_) + ", train.steps = " +
                     std::to_string(cfg_.train.steps) + ": nothing to train (raise train.steps to go on)");
  if (print && cfg_.train.profile_step > 0 && cfg_.train.profile_step <= step_)
    progress.message("train.profile_step = " + std::to_string(cfg_.train.profile_step) + ": already done (resumed at step " +
                     std::to_string(step_) + "), no profile");
  if (cfg_.train.mfu && !mfu_) {  // train/mfu.h: every rank measures its own ceiling (collective)
    if (device_.is_cpu()) {
      // Single-device sizes, trainable and frozen (Note [MFU's N], Note [MFU of a partly frozen
      // model] in train/mfu.h).
      mfu_ = measure_mfu_ceiling(cfg_, palm_counts(*model_, *par_.placements),
                                 cfg_.data.batch_size / (mesh_ ? mesh_->dp_size() : 1));
      mfu_->total_ceiling_gflops = mean_over_ranks(mfu_->ceiling_gflops) * world_size();
    }
    if (print)
      progress.message(mfu_ ? mfu_->summary()
                            : "train.mfu: not measured on " + device_.str() + " (the ceiling is a CPU's GEMMs)");
  }
  // A checkpoint, timed for the budget (Note [Preemption]).
  auto checkpoint = [&]() -> Status {
    const auto start = Clock::now();
    auto written = save_checkpoint();
    if (!written.is_ok()) return written.status();
    if (!written.value()) {  // Note [No checkpoint from non-finite state] in trainer_checkpoint.cc
      if (print) progress.message(skipped_checkpoint_note_);
      return Status::ok();
    }
    last_checkpoint_s_ = std::chrono::duration<double>(Clock::now() - start).count();
    last_checkpoint_step_ = step_;
    if (Status s = write_adapter_files(); !s.is_ok()) return s;
    monitor_->on_checkpoint(last_checkpoint_s_, is_rank0() ? checkpoint_bytes(cfg_.train.out_dir) : 0);
    return Status::ok();
  };
  const auto run_start = Clock::now();
  while (step_ < last) {
    Boundary b = agree_at_boundary(/*idle=*/false);
    if (b.control & monitor::kControlRollback) {  // Note [Rollback and skip]
      const int64_t bad = step_;
      auto done = rollback_and_skip();
      if (!done.is_ok()) return done.status();
      prev_loss_finite_ = true;
      metrics.value().write_rollback(bad, step_);
      if (print) progress.message(done.value() + (is_rank0() ? ": " + b.control_reason : ""));
    }
    if ((b.control & monitor::kControlCheckpoint) && step_ > last_checkpoint_step_) {
      if (print) progress.message("checkpoint after step " + std::to_string(step_) + ": " + b.control_reason);
      if (Status s = checkpoint(); !s.is_ok()) return s;
    }
    if ((b.control & monitor::kControlPause) && !(b.control & monitor::kControlStop) && b.stop_reason.empty()) {
      const std::string why = is_rank0() ? b.control_reason : "paused by rank 0";
      if (print)
        progress.message("paused after step " + std::to_string(step_) + ": " + why +
                         (monitor_->port() > 0 ? " (trident ctl URL resume, or POST /resume, continues)"
                                               : " (no control server, monitor.port = 0: SIGTERM stops with a checkpoint)"));
      auto held = hold_paused(why, checkpoint);
      if (!held.is_ok()) return held.status();
      b = held.value();
      if (print && b.stop_reason.empty() && !(b.control & monitor::kControlStop))
        progress.message("resumed at step " + std::to_string(step_));
    }
    if (b.stop_reason.empty() && (b.control & monitor::kControlStop)) {
      b.stop_reason = is_rank0() ? "stop requested (" + b.control_reason + ")" : "stop requested on rank 0";
      stopped_by_rule_ = (b.control & monitor::kControlStopByRule) != 0;  // Note [Exit statuses]
    }
    if (const std::string& why = b.stop_reason; !why.empty()) {
      monitor_->set_state("stopping", why);
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
    last_busy_s_ = std::max(0.0, m.step_s - m.comm_wait_s);
    if (profile)
      report_step_profile(profile->stop(), cfg_.train.out_dir, step_, comm_ ? comm_->rank() : 0, world_size(),
                          print ? &progress : nullptr);
    if (mfu_) m.mfu = mfu_->mfu(m.tokens_per_s);
    m.memory = monitor_->memory();
    ++steps_this_process_;
    m.elapsed_s = std::chrono::duration<double>(Clock::now() - run_start).count();
    metrics.value().write_step(m);
    monitor_->on_step(m);
    if (print) progress.step(m);
    if (on_step) on_step(m);
    // A non-finite loss ends the run, unless a rule will roll it back at the next boundary
    // (every rank sees the same loss, so every rank decides alike).
    const bool finite = std::isfinite(m.loss);
    if (!finite && !(prev_loss_finite_ && tolerates_non_finite_loss())) {
      diverged_ = true;
      return Status::error(ErrorKind::kValue,
                           "training loss became " + std::to_string(m.loss) + " at step " + std::to_string(m.step) +
                               " (lr " + std::to_string(m.lr) + ")" +
                               (prev_loss_finite_ ? std::string("; a [[alerts]] rule with condition = \"not_finite\" and "
                                                                "actions rollback_and_skip or stop acts on it instead")
                                                  : std::string(", the step after a non-finite one: the run has diverged")));
    }
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
      monitor_->on_eval(step_, val);
      if (on_eval) on_eval(step_, val);
    }
    if ((ci > 0 && step_ % ci == 0) || at_end) {
      Status s = checkpoint();
      if (!s.is_ok()) return s;
    }
    prev_loss_finite_ = finite;
    longest_iteration_s_ =
        std::max(longest_iteration_s_, std::chrono::duration<double>(Clock::now() - iteration_start).count());
  }
  if (!prev_loss_finite_) {
    diverged_ = true;
    return Status::error(ErrorKind::kValue, "training loss became non-finite at the last step, " +
                                                std::to_string(step_) + ": nothing left to roll back for");
  }
  if (print) progress.finish();
  if (step_ == cfg_.train.steps) monitor_->set_state("finished");
  return Status::ok();
}

}  // namespace trident::train
