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
//
// Not here: the plateau rule (evaluations, alert_rule.h), the hang watchdog (watchdog.h),
// acting on an event (train/run_monitor.cc). Not thread-safe: the training thread owns them.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <queue>
#include <vector>

#include "monitor/alert_rule.h"

namespace trident::monitor {

// What a condition sees of one step.
struct StepSample {
  int64_t step = 0;
  double loss = 0.0;
  double grad_norm = 0.0;
  double tokens_per_s = 0.0;
  bool skipped = false;  // the fp16 loss scaler skipped this step (inf/NaN gradients by design)
};

// Note [Spike counting]
// A spike is judged against the `window` finite values before it: z = (x - mean) / std
// (population std). Nothing fires before the window is full, so the first steps' fast fall
// does not count. The value that fired does not join the window (it would lift the baseline
// and hide a second spike), and the rule then stays quiet for `window` steps, so a spike
// that lasts several steps (a bad stretch of data) is reported once; the values of those
// steps do join the window. A window of equal values (std 0) fires on any larger value.
// After a rollback (rollback_and_skip) the trainer calls reset(): the history is of the
// discarded trajectory (straggler and memory_high keep theirs: machines, not trajectories).
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
  void reset();

 private:
  std::optional<AlertEvent> spike(const StepSample& s, double x, const char* metric);
  std::optional<AlertEvent> throughput(const StepSample& s);
  AlertEvent event(const StepSample& s, const char* metric, double value, std::string detail) const;

  AlertRule rule_;
  bool last_finite_ = true;   // not_finite: fires on the first bad step after a good one
  std::deque<double> window_; // spikes: the last `window` values
  int64_t quiet_ = 0;         // steps left to stay quiet after firing
  // throughput: the run's values in two heaps around the median
  std::priority_queue<double> low_;
  std::priority_queue<double, std::vector<double>, std::greater<double>> high_;
};

}  // namespace trident::monitor
