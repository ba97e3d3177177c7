// The per-step alert conditions of `[[alerts]]` (monitor/alert_rule.h): each keeps the little
// history its test needs and says, step by step, whether its rule fires.
//
//   not_finite       the step's loss, or its gradient norm, is NaN or +-Inf (a gradient norm
//                    of a step the fp16 loss scaler skipped is expected to be inf: not counted)
//   loss_spike       the loss's z-score against the previous `window` finite losses is above
//                    `threshold`   (Note [Spike counting])
//   grad_norm_spike  the same for the gradient norm
//   throughput_drop  tokens/s below `fraction` x the median of every earlier step of the run
//                    (after `window` steps of history)
//   straggler        a rank's step time without communication waits above `factor` x the
//                    median across ranks (observe_ranks; quiet for `window` steps after firing)
//   memory_high      a rank's host has used more than `memory_fraction` of its memory, or
//                    its device allocator holds more than that fraction of the device's
//                    limit (observe_ranks; quiet for `window` steps after firing)
//   expert_collapse  a mixture of experts' busiest expert took more than `fraction` of the
//                    routing choices: of its layer's over the step and every rank, in the
//                    layer where that share is largest (metrics.jsonl's moe_layers; without
//                    them the step's moe_max_load, mean over layers and ranks) for
//                    `window` steps in a row (quiet for `window` steps after firing); a step
//                    without the value (a dense model) resets the count
//
// Not here: the plateau rule (evaluations, alert_rule.h), the hang watchdog (watchdog.h),
// acting on an event (train/run_monitor.cc). Not thread-safe: the training thread owns them.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "monitor/alert_rule.h"

namespace trident::monitor {

// What a condition sees of one step.
struct StepSample {
  int64_t step = 0;
  double loss = 0.0;
  double grad_norm = 0.0;
  double tokens_per_s = 0.0;
  bool skipped = false;  // the fp16 loss scaler skipped this step (inf/NaN gradients by design)
  double max_expert_load = std::numeric_limits<double>::quiet_NaN();  // NaN: none
  int64_t max_expert_load_layer = -1;  // the layer of max_expert_load; -1: moe_max_load's mean
};

// Note [Spike counting]
// A spike is judged against the `window` finite values before it: z = (x - mean) / std
// (population std). Nothing fires before the window is full, so the first steps' fast fall
// does not count. The value that fired does not join the window (it would lift the baseline
// and hide a second spike), and the rule then stays quiet for `window` steps, so a spike
// that lasts several steps (a bad stretch of data) is reported once; the values of those
// steps do join the window. A window of equal values (std 0) fires on any larger value.
// After a rollback to the checkpoint of step C (rollback_and_skip) the trainer calls
// rollback_to(C): the values of steps after C leave the window (they belong to the discarded
// trajectory, the spike's neighbours among them), the values up to C stay, so the window is
// the one the run had at step C and judges the replayed steps at once, rather than going
// blind for `window` steps. To have them, a spike rule keeps the values of `window` +
// `rollback_window` steps (a rollback further back than that refills the window as at the
// start) and judges against the newest `window`. The quiet steps end. throughput_drop keeps its median,
// straggler and memory_high everything: they measure machines, not trajectories.
//
// Note [Rollback limits]
// A rollback that lands on a checkpoint already bad (finite but diverged weights) spikes again
// at once, and rolling back to it again and again is an endless loop (hundreds a minute). So
// each rule counts its rollbacks per target checkpoint: a rollback counts while the step that
// fires is within `rollback_window` steps of the step it rolled back from. A checkpoint that
// was the target `rollback_limit` times is passed over for the next older one (its rollback
// moves the newer ones aside); when every checkpoint before the step is spent,
// rollback_target() says none and the trainer stops the run as diverged (exit 80). The counts
// go into checkpoints with the rest of the rule's state (Note [Alert state in checkpoints] in
// train/run_monitor.cc), so a requeued run does not start counting afresh.
class StepCondition {
 public:
  // The rule's condition must be one of the per-step ones (is_step_condition).
  explicit StepCondition(const AlertRule& rule);
  static bool is_step_condition(const std::string& condition);
  std::optional<AlertEvent> observe(const StepSample& s);
  // What every rank reported at a step boundary (index = rank): straggler and memory_high.
  struct RankSample {
    std::vector<double> busy_s;        // the last step without communication waits
    std::vector<double> memory_ratio;  // its host's used / total memory (NaN: not measured)
    // Its device allocator's reserved bytes / the device's limit (NaN, or absent: no device
    // memory with a known limit; MemoryStats::limit).
    std::vector<double> device_memory_ratio;
  };
  std::optional<AlertEvent> observe_ranks(int64_t step, const RankSample& ranks);
  // After a rollback to the checkpoint of step `step` (Note [Spike counting]).
  void rollback_to(int64_t step);

  // Note [Rollback limits]: the newest of `candidates` (the steps of the complete checkpoints
  // before `bad`, ascending) that this rule has rolled back to fewer than rollback_limit times
  // within rollback_window steps of `bad`; nullopt when every one is spent.
  std::optional<int64_t> rollback_target(int64_t bad, const std::vector<int64_t>& candidates) const;
  // Counts a rollback from step `from` to the checkpoint of step `to`.
  void record_rollback(int64_t from, int64_t to);
  // The rollbacks counted at step `bad`, in words ("3 to step 30, 3 to step 20"), for messages.
  std::string rollbacks_text(int64_t bad) const;

  // What a checkpoint keeps of it (Note [Alert state in checkpoints] in train/run_monitor.cc):
  // the spike window, the quiet steps, not_finite's last value and the rollback counts
  // (throughput's median, straggler and memory_high: not, they are the machines').
  nlohmann::json state() const;
  // Restores state(); a malformed one throws trident::Error naming the rule and the field.
  void restore(const nlohmann::json& state);

 private:
  std::optional<AlertEvent> spike(const StepSample& s, double x, const char* metric);
  std::optional<AlertEvent> throughput(const StepSample& s);
  std::optional<AlertEvent> collapse(const StepSample& s);
  AlertEvent event(const StepSample& s, const char* metric, double value, std::string detail) const;

  AlertRule rule_;
  bool last_finite_ = true;   // not_finite: fires on the first bad step after a good one
  std::deque<std::pair<int64_t, double>> window_;  // spikes: (step, value), up to kept_values()
  size_t kept_values() const { return static_cast<size_t>(rule_.window + rule_.rollback_window); }
  std::vector<std::pair<int64_t, int64_t>> rollbacks_;  // (from step, to step), Note [Rollback limits]
  int64_t quiet_ = 0;         // steps left to stay quiet after firing
  // throughput: the run's values in two heaps around the median
  std::priority_queue<double> low_;
  std::priority_queue<double, std::vector<double>, std::greater<double>> high_;
};

}  // namespace trident::monitor
