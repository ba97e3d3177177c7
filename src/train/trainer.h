// The training loop for any model family (models/causal_lm.h) on one process or a mesh of
// ranks: micro-batches with gradient accumulation, global-norm clipping, AdamW with a
// warmup/cosine schedule, periodic evaluation, metrics (JSONL) and progress, and checkpoints
// that resume bit-identically. parallel/parallelize.h applies the run's parallelism; the step
// drives what it returns through one interface (parallel/update_strategy.h).
//
// A step: lr = schedule(step); for each of grad_accum_steps micro-batches, loss / accum is
// back-propagated (gradients accumulate in .grad); clip; AdamW; zero the gradients. Under
// mixed precision (precision.dtype bf16/fp16) the model runs in that dtype, gradients fold
// into fp32 master weights, which AdamW steps and checkpoints store; fp16 multiplies the loss
// by a dynamic loss scale and skips steps whose gradients overflow (optim/mixed_precision.h).
// Auxiliary losses the forward adds (nn/aux_outputs.h) start their backward from the same seed
// (1 / accum, times the loss scale), and their values, with the forward's metrics, come out
// per step as StepMetrics::aux (metrics.jsonl's "aux"), averaged over micro-batches and ranks.
//
// Checkpoint directory <out_dir>/step_NNNNNN (checkpoint/checkpoint_dir.h), files:
//   model.safetensors      parameters under the family's Hugging Face names (fp32 masters under mixed precision)
//   optimizer.safetensors  AdamW state: "<param>.exp_avg", "<param>.exp_avg_sq" (f32)
//     (when several ranks write, instead: shard.rank<R>.safetensors, each writing rank's part of
//     both, written at once; the manifest says where each piece is: Note [Checkpoints from
//     placements] in train/checkpoint_pieces.h. `trident export` writes the weights as one file.)
//   trainer_state.json     step, optimizer step, sampler state, dropout RNG state, loss scaler
//   config.toml            the resolved training config
//   config.json            Hugging Face's config for the model (so transformers loads it)
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "adapters/lora.h"
#include "checkpoint/checkpoint_dir.h"
#include "comm/communicator.h"
#include "core/status.h"
#include "data/sampler.h"
#include "models/causal_lm.h"
#include "optim/adamw.h"
#include "optim/lr_schedule.h"
#include "optim/mixed_precision.h"
#include "parallel/mesh.h"
#include "parallel/micro_batch_runner.h"
#include "parallel/parallelize.h"
#include "parallel/placement.h"
#include "parallel/update_strategy.h"
#include "quantization/quantized_base.h"
#include "train/metrics.h"
#include "train/mfu.h"
#include "train/run_monitor.h"
#include "train/fault_injection.h"
#include "train/train_config.h"

namespace trident::train {

struct WrittenShard;  // train/checkpoint_pieces.h

class Trainer {
 public:
  // Throws unless cfg's layout (parallel.*, data.batch_size) fits `ranks` ranks, naming the
  // keys. create() checks it too; `trident train` checks it first, so that it exits as a config
  // error (Note [Exit statuses]) and `launch` can try fewer ranks (Note [Restarts with fewer ranks]).
  static void check_layout(const TrainConfig& cfg, int ranks);

  // Builds the model (GPT-2 init, or weights from train.init_from), optimizer and samplers,
  // and resumes from the latest checkpoint in train.out_dir when train.resume is set.
  // With a communicator of more than one rank, trains data-parallel: each rank takes its
  // slice of every global batch (data.batch_size rows, divisible by the ranks), gradients are
  // averaged (parallel/data_parallel.h), rank 0 alone prints, writes metrics and checkpoints.
  // On a device (train.device, or `device` when given: the tests' emulated device), the
  // mesh's collectives run where the parameters are: NCCL between GPUs when the build has it,
  // else MPI staging through host memory (comm/device_communicator.h).
  static StatusOr<std::unique_ptr<Trainer>> create(const TrainConfig& cfg,
                                                   std::shared_ptr<comm::Communicator> comm = nullptr,
                                                   std::optional<Device> device = std::nullopt);

  // Trains until `until_step` optimizer steps are done (default: train.steps), evaluating
  // and checkpointing on the configured intervals and at the end. Stops early, with a
  // checkpoint, when a rank is sent a stop signal or train.max_runtime runs out
  // (Note [Preemption] in trainer.cc): then stop_reason() says why.
  [[nodiscard]] Status run(int64_t until_step = -1);
  // Why the last run() stopped before its last step ("SIGTERM on rank 1"), or "".
  const std::string& stop_reason() const { return stop_reason_; }
  // Whether that stop was an alert rule's (stop, or pause without a server): the CLI exits
  // kExitStoppedByRule (79), not 75 (Note [Exit statuses] in train/stop_request.h).
  bool stopped_by_rule() const { return stopped_by_rule_; }
  // Whether the last run() failed because training diverged: a non-finite loss no rule acted
  // on, or rollbacks spent (Note [Rollback limits]); the CLI exits kExitDiverged (80).
  bool diverged() const { return diverged_; }
  // Non-empty when the checkpoint resumed from ran its GEMMs on other engines (run() prints it).
  const std::string& engines_note() const { return engines_note_; }
  // What resume passed over: incomplete step checkpoints newer than the one it loads.
  const std::string& resume_note() const { return resume_note_; }
  // Mean validation loss over train.eval_batches sequential batches from the start of the
  // validation file (the same batches every time). Needs a validation file.
  double evaluate();
  // Whether there is a validation file to evaluate on (data.val_file names one that exists).
  bool has_validation() const { return val_file_ != nullptr; }
  // Collective with more than one rank. False: not written, because some weight or optimizer
  // state is not finite (Note [No checkpoint from non-finite state]); skipped_checkpoint_note()
  // says which tensor on which rank.
  [[nodiscard]] StatusOr<bool> save_checkpoint();
  const std::string& skipped_checkpoint_note() const { return skipped_checkpoint_note_; }
  [[nodiscard]] Status load_checkpoint(const std::string& dir);

  int64_t step() const { return step_; }
  models::CausalLM& model() { return *model_; }
  // Parameters of the whole model (under tensor or pipeline parallelism this rank holds fewer).
  int64_t num_model_parameters() const { return par_.placements->numel(); }
  const TrainConfig& config() const { return cfg_; }
  // The base stored in NF4 ([quantization] base = "nf4"), on this rank; none otherwise.
  const std::optional<quantization::QuantizedBase>& quantized_base() const { return quantized_base_; }
  // The ranks' named mesh (null in one process without a communicator).
  const parallel::DeviceMesh* mesh() const { return mesh_; }
  // Every parameter's placement, trainability, storage dtype and reduction group.
  const parallel::PlacementTable& placements() const { return *par_.placements; }
  // The pipeline (null unless parallel.pp > 1): its timings of the last step.
  const parallel::Pipeline* pipeline() const { return par_.pipeline.get(); }

  // The run's metrics registry and control (null before run()).
  RunMonitor* monitor() { return monitor_.get(); }
  // Observers (tests, the CLI): called after each step / evaluation.
  std::function<void(const StepMetrics&)> on_step;
  std::function<void(int64_t step, double val_loss)> on_eval;
  // Printing: the progress bar and log lines; off for quiet runs.
  bool show_progress = true;

 private:
  Trainer(const TrainConfig& cfg, std::shared_ptr<comm::Communicator> comm, Device device);
  bool is_rank0() const { return !comm_ || comm_->rank() == 0; }
  int world_size() const { return comm_ ? comm_->size() : 1; }
  int tp_size() const { return mesh_ ? mesh_->tp_size() : 1; }
  // This rank's rows of a global batch.
  data::Batch local_rows(const data::Batch& batch) const;
  // This rank's rows of `batch` as a micro-batch, with their documents under
  // data.document_masking.
  parallel::MicroBatch micro_batch(const data::Batch& batch) const;
  // The mean of `v` over the ranks.
  // With `any`: also whether it is true on any rank (in and out), in the same all-reduce.
  double mean_over_ranks(double v, bool* any = nullptr) const;
  // Per name, the mean of the ranks' auxiliary values `mine` over every rank's, when
  // `any_rank` has some (collective; Note [Auxiliary values over ranks]).
  std::map<std::string, double> aux_means(const nn::AuxValues& mine, bool any_rank);
  // The mixture-of-experts layers' metrics of the step from every rank's per-layer sums
  // (Note [Tokens per expert] in train/moe_metrics.h); collective like aux_means.
  std::vector<MoeLayerMetrics> moe_layers_over_ranks(const nn::AuxLayerSums& mine, bool any_rank);
  [[nodiscard]] Status init();
  StepMetrics train_step();
  // What every rank does at a step boundary (collective: every rank gets the same answer):
  // stop, by a signal or for train.max_runtime (why, or ""), and rank 0's control requests
  // (monitor::ControlBits; Note [Control at step boundaries]). `idle`: the run is paused, so
  // wait for the answer sleeping rather than in a blocking collective.
  struct Boundary {
    std::string stop_reason;
    uint32_t control = 0;
    std::string control_reason;  // rank 0's; "" elsewhere
  };
  Boundary agree_at_boundary(bool idle);
  // Holds every rank at this boundary until a resume, stop request or signal; writes
  // checkpoints asked for meanwhile. Returns the boundary that ended the pause.
  StatusOr<Boundary> hold_paused(const std::string& why, const std::function<Status()>& checkpoint);
  // Restores the newest checkpoint before this step and skips the batches since (collective;
  // Note [Rollback and skip] in trainer_rollback.cc). Returns what it did, in words.
  StatusOr<std::string> rollback_and_skip();
  // Whether a not_finite rule acts on a NaN/Inf loss at the next boundary (rollback_and_skip,
  // stop, pause), so the loss does not end the run first (log and notify act at once).
  bool tolerates_non_finite_loss() const;

 public:
  // Whether checkpoint tensor `name` is a rank's own state ("rank<R>.<name>"), not a weight.
  static bool is_rank_state(const std::string& name);

 private:
  // Adds the trainer state and configs, commits, and prunes old checkpoints.
  // `stage_dropout_offsets`: under pipeline parallelism, every stage's dropout generator offset.
  [[nodiscard]] Status commit_checkpoint(checkpoint::CheckpointWriter& w, int64_t optimizer_step,
                                         const std::vector<int64_t>& stage_dropout_offsets = {});
  // Whether `ok` holds on every rank (collective).
  bool all_ranks(bool ok) const;
  // Checkpoints written by several ranks: rank 0 opens checkpoint `name` (the others get
  // nullopt), and every rank learns whether it could (collective).
  StatusOr<std::optional<checkpoint::CheckpointWriter>> begin_shared_checkpoint(const std::string& name);
  // Writes `shards` (under their keys, each read from `values` only when written) as `file`
  // into its staging directory when `write`; then every rank learns each rank's file size and
  // CRC-32C (the name only of its own), or the first failure.
  StatusOr<std::vector<checkpoint::ManifestFile>> write_shard_files(
      const std::string& name, const std::string& file, const std::vector<WrittenShard>& shards,
      const std::function<StatusOr<Tensor>(size_t)>& values, bool write);
  // rank 0's commit status, agreed by every rank (collective).
  [[nodiscard]] Status agree_on(const Status& rank0_status, const std::string& name) const;
  TrainConfig cfg_;
  std::unique_ptr<models::CausalLM> model_;

  std::shared_ptr<comm::Communicator> comm_;     // null: one process
  Device device_ = Device::cpu();                 // train.device: where parameters, state and batches live
  // The run's parallelism (parallel/parallelize.h): the mesh, the placement table, the plans,
  // the micro-batch runner and the update strategy (data parallel, masters, ZeRO 1-3,
  // offload). ZeRO-3 is the model's part hooks, so this goes before the model.
  parallel::Parallelized par_;
  parallel::DeviceMesh* mesh_ = nullptr;          // par_'s (null: one process)
  parallel::MicroBatchRunner* runner_ = nullptr;  // the pipeline or the sequential runner
  parallel::UpdateStrategy* update_ = nullptr;    // par_'s
  std::unique_ptr<optim::DynamicLossScaler> scaler_;
  std::unique_ptr<optim::LRSchedule> schedule_;
  std::unique_ptr<data::BatchSampler> train_sampler_;
  std::shared_ptr<const data::TokenFile> val_file_;
  int64_t step_ = 0;
  // LoRA (train/trainer_adapters.cc): the adapters train.init_adapter or [lora] add to the
  // model before it is parallelized, and the PEFT files written after every checkpoint.
  // Note [Steps over masked tokens] in trainer.cc. Collective.
  void weigh_by_trained_tokens(std::vector<parallel::MicroBatch>& micro) const;
  std::shared_ptr<const data::LossMask> val_mask_;  // beside data.val_file; null: none
  std::optional<int64_t> end_of_document_;          // data.document_masking: the end-of-text token
  [[nodiscard]] Status apply_adapters();
  [[nodiscard]] Status write_adapter_files();
  std::optional<adapters::LoraOptions> lora_;  // the adapters' effective options; none without LoRA
  std::vector<adapters::LoraLayerInfo> lora_layers_;
  // QLoRA's frozen base in NF4 (quantization/quantized_base.h), from [quantization]; applied in
  // quantize_base() after parallelization (Note [Where a quantized base comes from]).
  [[nodiscard]] Status quantize_base();
  // A frozen parameter's values as a checkpoint holds them (a quantized one's dequantized).
  Tensor frozen_values(const std::string& name) const;
  std::optional<quantization::QuantizedBase> quantized_base_;
  FaultInjector* faults_ = fault_injector();  // a test's (train/fault_injection.h); null in real runs
  bool prev_loss_finite_ = true;  // a second non-finite loss in a row ends the run
  double last_busy_s_ = 0.0;      // the last step without communication waits (Note [Straggler times])
  // Values per rank in the boundary all-reduce (Note [Rank slots]): 0, 1 or 2.
  int rank_fields() const;
  // Preemption (Note [Preemption]).
  int64_t steps_this_process_ = 0;
  double longest_iteration_s_ = 0.0;   // the slowest step (with its evaluation and checkpoint) so far
  double last_checkpoint_s_ = 0.0;     // how long the last checkpoint took to write
  int64_t last_checkpoint_step_ = 0;   // the step of the newest checkpoint saved or loaded (0: none)
  std::string stop_reason_;
  bool stopped_by_rule_ = false;  // stop_reason_ is an alert rule's
  bool diverged_ = false;         // the last run() ended for a non-finite loss or spent rollbacks
  // The alert rules' state from the checkpoint resumed from, for the monitor that run() starts
  // (Note [Alert state in checkpoints] in train/run_monitor.cc); null: none.
  nlohmann::json saved_alert_state_;
  std::string no_validation_reason_;   // why there is no validation file, if there is none
  std::string engines_note_;  // set on resume when the checkpoint ran on other GEMM engines
  std::string resume_note_;   // set on resume: the checkpoint, and incomplete ones passed over
  std::string skipped_checkpoint_note_;  // why the last save_checkpoint() wrote nothing
  std::optional<MfuCeiling> mfu_;      // train.mfu on the CPU: measured by the first run()
  // Metrics, endpoints and run control (train/run_monitor.h), started by the first run();
  // last, so that it goes before the mesh it reads.
  std::unique_ptr<RunMonitor> monitor_;
};

// Loads `params` (model parameters under their names) from a checkpoint of any layout:
// every tensor is assembled from its shards (memory for one tensor and one shard at a time).
[[nodiscard]] Status load_checkpoint_weights(const std::vector<nn::NamedTensor>& params,
                                             const checkpoint::CheckpointReader& reader);

// Loads model weights with the family's Hugging Face names (CausalLM::parameter_name_from_hf)
// into `model`, converting dtypes (f32, bf16, f16), from a safetensors file or a Hugging Face
// model directory (its model.safetensors or index's shards, train/hf_model_dir.h); errors name
// every unknown, missing, repeated or mis-shaped tensor.
[[nodiscard]] Status load_hf_weights(models::CausalLM& model, const std::string& path);

// The resolved config as TOML (what `trident train` prints and checkpoints store).
std::string config_to_toml(const TrainConfig& cfg);

}  // namespace trident::train
