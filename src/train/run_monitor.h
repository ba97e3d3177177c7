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

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "core/device.h"
#include "core/status.h"
#include "monitor/alert_rule.h"
#include "monitor/http_server.h"
#include "monitor/process_stats.h"
#include "monitor/registry.h"
#include "monitor/run_control.h"
#include "monitor/tensorboard_writer.h"
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
  // The run's state for GET /status: running, paused, stopping, finished.
  void set_state(const std::string& state, const std::string& reason = "");

  // Rank 0's control (null on other ranks): requests are taken at step boundaries.
  monitor::RunControl* control() { return rank_ == 0 ? &control_ : nullptr; }
  monitor::Registry& registry() { return registry_; }
  // The server's port (0: none).
  int port() const { return server_ ? server_->port() : 0; }

 private:
  RunMonitor(const TrainConfig& cfg, int rank, const parallel::DeviceMesh* mesh, Device device);
  void publish_memory();
  void publish_comm();
  void publish_system(bool force);
  void update_status();

  TrainConfig cfg_;
  int rank_;
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
  std::vector<monitor::PlateauState> plateaus_;  // one per [[alerts]] rule (rank 0)
  void fire(const monitor::AlertRule& rule, const monitor::AlertEvent& event);
};

}  // namespace trident::train
