// Training metrics: one JSON object per line (JSONL) per step and per evaluation, flushed as
// written so a crashed run keeps every completed step. Written by the training loop only;
// reconcile_metrics trims the file to a resumed checkpoint's step first (Note [Metrics on resume]).
#pragma once

#include <array>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/status.h"
#include "nn/aux_outputs.h"
#include "train/moe_metrics.h"

namespace trident::train {

struct StepMetrics {
  int64_t step = 0;          // 1-based: the number of optimizer steps completed
  double loss = 0.0;         // mean training loss over the step's micro-batches
  double lr = 0.0;
  double grad_norm = 0.0;    // global norm before clipping
  double tokens_per_s = 0.0; // this step's throughput
  double elapsed_s = 0.0;    // since the run (or resume) started
  // Mixed precision (precision.dtype = fp16): the loss scale used by this step, whether the
  // step was skipped for an inf/NaN gradient, and the run's skipped steps so far.
  std::optional<double> loss_scale;
  bool skipped = false;
  int64_t skipped_steps = 0;
  // More than one process: bytes this rank handed to collectives during the step (all
  // operation kinds; comm::CommStats), e.g. ~4P for data parallel's all-reduce of P floats.
  std::optional<int64_t> comm_bytes;
  // ... and the bytes it sent to other ranks for them (Note [Link classes]): a ring all-reduce
  // of P floats sends 2 (p - 1) / p * 4P, a compressed exchange what its algorithm sends.
  std::optional<int64_t> comm_sent_bytes;
  // parallel.offload_optimizer_device or offload_param = "nvme": this rank's bytes read from and
  // written to its NVMe tiers (the optimizer state's and ZeRO-3's parameters', together) during
  // the step, and the seconds it waited for them.
  struct NvmeTraffic {
    int64_t read_bytes = 0, written_bytes = 0;
    double wait_s = 0.0;
  };
  std::optional<NvmeTraffic> nvme;
  // train.mfu: model FLOPs per second (PaLM's count) over the measured GEMM ceiling of the
  // run's dtype (train/mfu.h), a fraction.
  std::optional<double> mfu;
  // Where the step's wall time went (seconds): drawing batches, forward and backward of
  // every micro-batch, waiting for communication the backward did not hide (the gradient
  // reductions' tail and the loss's all-reduce), the optimizer (clipping, update,
  // zeroing); step_s is the whole step.
  double data_s = 0.0, forward_backward_s = 0.0, comm_wait_s = 0.0, optimizer_s = 0.0, step_s = 0.0;
  // The device allocator's bytes after the step: in use per category (core/allocator.h's
  // names; activations are mostly freed by then) and each category's peak since the start,
  // the whole in-use peak and the bytes reserved from the system (live and cached); and the
  // process's resident memory as of the monitor's last /proc sample (at most
  // monitor.system_interval old). Set by the trainer from its RunMonitor.
  struct Memory {
    std::array<int64_t, kNumMemoryCategories> bytes{}, peak_bytes{};
    int64_t peak = 0, reserved = 0;
    int64_t limit = 0;  // the device's limit (MemoryStats::limit; 0: none known, as on the host)
    std::optional<int64_t> rss;
  };
  std::optional<Memory> memory;
  // Auxiliary losses and metrics of the forward (nn/aux_outputs.h), per name: the mean of
  // every value recorded during the step, over its micro-batches and every rank (Note
  // [Auxiliary values over ranks] in trainer.cc). Empty when the model recorded none.
  std::map<std::string, double> aux;
  // Mixture-of-experts layers (train/moe_metrics.h), by layer: tokens per expert and dropped
  // choices over the step and every rank (Note [Tokens per expert]), the exchanges' cost under
  // expert parallelism. Empty for a dense model.
  std::vector<MoeLayerMetrics> moe_layers;
};

// A rank's auxiliary values (AuxOutputs::take()) as text for the other ranks: a JSON object
// {"name": [sum, count], ...} (doubles written to read back exactly).
std::string aux_values_to_json(const nn::AuxValues& values);
// The mean per name over ranks' values (each aux_values_to_json's text): sums and counts
// are added over the ranks, so a name some ranks lack (a pipeline stage without the layer
// that records it) is the mean of the ranks that have it. Throws on text it cannot read.
std::map<std::string, double> merge_aux_values(const std::vector<std::string>& per_rank);

// What reconcile_metrics did: lines kept, step and evaluation lines after the step removed
// (with rollback lines of a trajectory after it), lines that were not JSON objects removed
// (`torn`: the last line cut mid-write, or such a line joined to the next run's first), and
// whether the file was rewritten (nothing to change: it is left alone).
struct MetricsReconcile {
  int64_t kept = 0, removed = 0, torn = 0;
  bool rewritten = false;
};

// Makes the metrics file at `path` what a run that never stopped would have written up to
// `step`, the step of the checkpoint a run resumes from (0: a run that starts afresh, whose file
// then keeps no stale run's lines). See Note [Metrics on resume]. The file is replaced
// atomically (a temporary file beside it, fsync, rename, fsync of the directory), so a crash
// leaves the old or the new file. A missing file is not an error. Errors: kIO naming the file.
// Not thread-safe against a writer of the same file: call it before opening a MetricsWriter.
StatusOr<MetricsReconcile> reconcile_metrics(const std::string& path, int64_t step);

class MetricsWriter {
 public:
  // Appends to `path` (creating it). An empty path writes nothing.
  static StatusOr<MetricsWriter> open(const std::string& path);
  MetricsWriter(MetricsWriter&& other) noexcept : file_(std::exchange(other.file_, nullptr)) {}
  MetricsWriter(const MetricsWriter&) = delete;
  ~MetricsWriter();

  void write_step(const StepMetrics& m);
  void write_eval(int64_t step, double val_loss);
  // A rollback (Note [Rollback and skip]): the steps after `to_step` logged so far were discarded.
  void write_rollback(int64_t from_step, int64_t to_step);

 private:
  explicit MetricsWriter(std::FILE* file) : file_(file) {}
  std::FILE* file_;
};

}  // namespace trident::train
