// What a training run publishes while it runs, and how it is controlled: the trainer hands
// each step's StepMetrics, each evaluation and each checkpoint to the RunMonitor at the step
// boundary (Trainer::run), never from inside a strategy's step. The monitor puts them, with
// the allocator's bytes per category, the communicators' counters per mesh axis and the
// process's /proc numbers, into a metrics registry (monitor/registry.h) that
//   - rank r's HTTP server (monitor.port + local rank) shows at GET /metrics,
//   - rank 0 writes to TensorBoard event files in train.out_dir (monitor.tensorboard),
// and rank 0's RunControl takes POST /pause, /resume, /checkpoint, /stop and reports
// GET /status (Note [Control at step boundaries] in trainer.cc).
//
// Metric names follow Prometheus' conventions: trident_*, base units (seconds, bytes, ratio),
// counters end in _total; every series has the labels job (monitor.job) and rank.
//
// Not here: deciding what to do at a boundary (the trainer), metrics.jsonl (train/metrics.h).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "core/allocator.h"
#include "core/device.h"
#include "core/status.h"
#include "monitor/alert_rule.h"
#include "monitor/http_server.h"
#include "monitor/notification_queue.h"
#include "monitor/nvml.h"
#include "monitor/process_stats.h"
#include "monitor/registry.h"
#include "monitor/run_control.h"
#include "monitor/step_conditions.h"
#include "monitor/tensorboard_writer.h"
#include "monitor/watchdog.h"
#include "parallel/mesh.h"
#include "train/metrics.h"
#include "train/train_config.h"

namespace trident::train {

class RunMonitor {
 public:
  // Starts rank `rank`'s server when monitor.port is set (an error names a busy port or an
  // unreadable token file), and on rank 0 the TensorBoard file. `mesh` (null in one process)
  // must outlive the monitor.
  static StatusOr<std::unique_ptr<RunMonitor>> start(const TrainConfig& cfg, int rank, const parallel::DeviceMesh* mesh,
                                                     Device device);
  ~RunMonitor();

  void on_step(const StepMetrics& m);
  void on_eval(int64_t step, double val_loss);
  void on_checkpoint(double seconds, int64_t bytes);
  // What every rank reported at the boundary after step `step` (Note [Rank slots] in
  // trainer.cc); rank 0's rules judge it.
  void on_ranks(int64_t step, const monitor::StepCondition::RankSample& ranks);
  // The device allocator's bytes now, and the resident memory of the last /proc sample.
  StepMetrics::Memory memory() const;
  // This rank's host memory used / total at the last /proc sample (NaN: not measured).
  double host_memory_ratio() const { return host_memory_ratio_; }
  // The device allocator's reserved bytes / the device's limit (MemoryStats::limit; NaN on
  // the host or where no limit is known).
  double device_memory_ratio() const;
  // Rank 0, before a rollback after step `bad` (Note [Rollback limits] in
  // monitor/step_conditions.h): the step of the checkpoint to roll back to among `candidates`
  // (the complete checkpoints before `bad`, ascending), the oldest any rule that asked for the
  // rollback allows; nullopt, with `why` set, when a rule has spent them all.
  std::optional<int64_t> rollback_target(int64_t bad, const std::vector<int64_t>& candidates, std::string* why) const;
  // After a rollback from step `bad` to the checkpoint of step `to` (Note [Rollback and skip]):
  // the per-step rules forget the discarded steps, and those that asked count the rollback.
  void on_rollback(int64_t bad, int64_t to);
  // Note [Alert state in checkpoints]: the rules' state (rank 0's; null elsewhere), and
  // restoring it on resume. A malformed state throws trident::Error naming the rule.
  nlohmann::json alert_state() const;
  void restore_alert_state(const nlohmann::json& state);
  // The run's state for GET /status: running, paused, stopping, finished.
  void set_state(const std::string& state, const std::string& reason = "");

  // Rank 0's control (null on other ranks): requests are taken at step boundaries.
  monitor::RunControl* control() { return rank_ == 0 ? &control_ : nullptr; }
  monitor::Registry& registry() { return registry_; }
  // The server's port (0: none).
  int port() const { return server_ ? server_->port() : 0; }

 private:
  RunMonitor(const TrainConfig& cfg, int rank, const parallel::DeviceMesh* mesh, Device device);
  void publish_memory(const StepMetrics::Memory& m);
  void publish_comm();
  void publish_moe(const std::vector<MoeLayerMetrics>& layers);
  void publish_system(bool force);
  void update_status();

  // Note [Series handles]: the series a step updates, registered once in start(); a step is
  // then a few relaxed atomic stores, no registry lookup (lock, map search, label compare).
  struct StepSeries {
    monitor::Gauge *step, *loss, *lr, *grad_norm, *tokens_per_s, *mfu, *loss_scale;
    monitor::Counter* skipped_steps;
    monitor::Gauge *data_s, *forward_backward_s, *comm_wait_s, *optimizer_s;
    monitor::Histogram* step_seconds;
    std::array<monitor::Gauge*, kNumMemoryCategories> memory_bytes;
    monitor::Gauge *memory_peak, *memory_reserved;
    // ZeRO-Infinity's optimizer tier: registered at its first step.
    monitor::Gauge *nvme_read = nullptr, *nvme_written = nullptr, *nvme_wait = nullptr;
    // Per mesh axis (world, dp, tp, pp) and op: registered when the op is first used.
    std::array<std::array<monitor::Counter*, comm::kNumCommOps>, 4> comm_calls{}, comm_bytes{};
    // Per mesh axis: bytes sent inside the host and to other hosts (Note [Link classes]).
    std::array<std::array<monitor::Counter*, 2>, 4> comm_link_bytes{};
    // Auxiliary values (StepMetrics::aux) by name: registered when the name first comes.
    std::map<std::string, monitor::Gauge*> aux;
    // Mixture-of-experts layers (StepMetrics::moe_layers): tokens per (layer, expert); per
    // layer dropped choices, aux and z losses, exchange bytes and seconds. Registered when a
    // value first comes.
    std::map<std::pair<int64_t, int64_t>, monitor::Gauge*> moe_expert_tokens;
    std::map<int64_t, std::array<monitor::Gauge*, 5>> moe_layer;
  };
  void register_step_series();

  TrainConfig cfg_;
  int rank_;
  StepSeries series_{};
  const parallel::DeviceMesh* mesh_;
  Device device_;
  monitor::Registry registry_;
  monitor::RunControl control_;
  std::unique_ptr<monitor::HttpServer> server_;
  std::optional<monitor::TensorBoardWriter> tensorboard_;
  monitor::RunStatus status_;
  std::chrono::steady_clock::time_point last_system_sample_{};
  std::optional<double> last_cpu_seconds_;
  std::chrono::steady_clock::time_point last_cpu_time_{};
  double recent_step_s_ = 0.0;  // moving average of step time, for the ETA
  std::vector<std::pair<size_t, monitor::PlateauState>> plateau_rules_;  // (index in cfg.alerts, state), rank 0
  std::vector<std::pair<size_t, monitor::StepCondition>> step_rules_;  // (index in cfg.alerts, state), rank 0
  std::vector<size_t> rollback_requests_;  // rules (index in cfg.alerts) that asked for the coming rollback
  void fire(const monitor::AlertRule& rule, const monitor::AlertEvent& event);
  // alerts.jsonl, the counter, log and notify: what every action list starts with.
  void record_and_notify(const monitor::AlertRule& rule, const monitor::AlertEvent& event, bool log);
  void on_hang(const monitor::AlertRule& rule, double seconds);  // the watchdog's thread
  std::atomic<int64_t> last_step_{0};  // for the watchdog's thread
  double host_memory_ratio_ = std::numeric_limits<double>::quiet_NaN();
  std::optional<int64_t> rss_bytes_;  // the last /proc sample
  std::unique_ptr<monitor::GpuMetrics> gpu_;  // NVML, on a GPU where it loads
  // Rank 0's notifications, sent off the training thread (Note [Notifications off the
  // training thread] in monitor/notification_queue.h); null when no rule notifies.
  std::unique_ptr<monitor::NotificationQueue> notifications_;
  // Last: the watchdogs' threads use the members above, so they stop first.
  std::vector<std::unique_ptr<monitor::Watchdog>> watchdogs_;  // one per hang rule, every rank
};

}  // namespace trident::train
