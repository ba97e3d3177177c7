// Progress display for the training loop. On a terminal: one bar line redrawn in place
// (step, loss, lr, tokens/s, ETA) at most 10 times a second. Otherwise (a log file, CI):
// a plain line every `log_interval` steps. Evaluations and messages always get their own line.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include "train/metrics.h"

namespace trident::train {

class Progress {
 public:
  Progress(int64_t total_steps, int64_t log_interval, std::FILE* out = stderr);
  void step(const StepMetrics& m);
  void message(const std::string& line);
  void finish();

 private:
  std::string bar(const StepMetrics& m) const;
  int64_t total_, log_interval_;
  std::FILE* out_;
  bool tty_;
  bool bar_visible_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

// "1h02m", "3m07s", "12s"
std::string format_duration(double seconds);

}  // namespace trident::train
