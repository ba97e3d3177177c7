// Alert rules: `[[alerts]]` tables of the config, each a name, a condition and actions, and
// the state that decides when a rule fires.
//
// Conditions: "plateau": the metric (val_loss) has not improved on its best by more than
// min_delta for `patience` evaluations in a row (Note [Plateau counting]); the per-step ones
// of monitor/step_conditions.h: not_finite, loss_spike, grad_norm_spike (z-score over
// `window` steps above `threshold`), throughput_drop (below `fraction` x the run's median);
// hang: no step finished for `timeout` seconds (monitor/watchdog.h, on every rank);
// straggler: a rank's step time without communication waits above `factor` x the median
// across ranks (Note [Straggler times] in train/trainer.cc); memory_high: the used memory of
// a rank's host (total - available, /proc/meminfo) above `memory_fraction` of its total, or
// its device allocator's reserved bytes above that fraction of the device's limit.
// Actions, a comma-separated list: log (a line on rank 0's stderr), notify (POST the event
// as JSON to `webhook`, e-mail it to `email_to` through `smtp_url`, and/or run `command` with
// the event's JSON on stdin), checkpoint,
// pause, stop (checkpoint, then exit 79: Note [Exit statuses] in train/stop_request.h),
// rollback_and_skip (restore the newest checkpoint before the step that fired and skip the
// batches since: Note [Rollback and skip] in train/trainer_rollback.cc; at most
// `rollback_limit` times to one checkpoint within `rollback_window` steps, then an older one:
// Note [Rollback limits] in monitor/step_conditions.h). All but log and notify act at the next step boundary on every
// rank (Note [Control at step boundaries] in train/trainer.cc).
//
// Not here: sending (monitor/notify.h), acting (the trainer).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/options.h"

namespace trident::monitor {

struct AlertRule {
  std::string name = "plateau";
  std::string condition = "plateau";
  std::string metric = "val_loss";
  int64_t patience = 3;
  double min_delta = 0.0;
  std::string actions = "log,notify,checkpoint,pause";
  int64_t window = 50;       // spikes: steps of history; throughput_drop: steps before it may fire
  double threshold = 6.0;    // spikes: the z-score above which a value is a spike
  double fraction = 0.5;     // throughput_drop: fires below fraction x the run's median
  double timeout = 600.0;    // hang: seconds without a finished step
  double factor = 3.0;       // straggler: fires above factor x the median across ranks
  double memory_fraction = 0.9;  // memory_high: fires when a host's used memory is above this fraction
  int64_t rollback_limit = 3;     // rollback_and_skip: rollbacks to one checkpoint before an older one
  int64_t rollback_window = 1000; // rollback_and_skip: steps a rollback counts against the limit
  std::string webhook = "";
  std::string smtp_url = "";
  std::string email_from = "trident@localhost";
  std::string email_to = "";
  std::string command = "";  // notify: a shell command run with the event's JSON on stdin
  static const OptionTable<AlertRule>& table();
  // Checks the action list and what notify needs; the error names the rule and the value.
  void validate() const;
  std::vector<std::string> action_list() const;
  bool has_action(const std::string& action) const;
};

// What a rule saw when it fired.
struct AlertEvent {
  std::string rule, condition, metric;
  int64_t step = 0;
  double value = 0.0;          // the metric now
  double best = 0.0;           // plateau: its best so far; spikes and throughput: the baseline
  int64_t best_step = 0;
  int64_t evaluations = 0;     // in a row without improvement
  std::string detail;          // per-step conditions: what was seen, in words
  std::string message() const; // one line for people
  std::string json() const;    // {"rule": ..., "step": ..., ...}
};

// Note [Plateau counting]
// The first evaluation sets the best; every later one either improves on it by more than
// min_delta (a new best, the count restarts) or counts one more evaluation without
// improvement. The rule fires when the count reaches `patience`, so with a loss that cannot
// move (lr 0) and patience 3 it fires at the 4th evaluation: the 3rd evaluation in a row
// with no improvement on the first, as Keras' EarlyStopping(patience=3) counts. Then the
// count restarts, so a run resumed while still on its plateau is told again only after
// `patience` more evaluations.
class PlateauState {
 public:
  explicit PlateauState(const AlertRule& rule) : rule_(rule) {}
  // The event when this evaluation makes the rule fire.
  std::optional<AlertEvent> observe(int64_t step, double value);
  // What a checkpoint keeps of it (Note [Alert state in checkpoints] in train/run_monitor.cc),
  // and restoring that; a malformed one throws trident::Error naming the field.
  nlohmann::json state() const;
  void restore(const nlohmann::json& state);

 private:
  AlertRule rule_;
  std::optional<double> best_;
  int64_t best_step_ = 0;
  int64_t since_best_ = 0;
};

}  // namespace trident::monitor
