// Learning-rate schedule: linear warmup from lr/warmup to lr over `warmup_steps`, then cosine
// decay to `min_lr` at `decay_steps` (and min_lr after), or constant lr after warmup.
// Steps count from 0 (the first optimizer step uses lr_at(0)), as in nanoGPT.
#pragma once

#include <cstdint>
#include <string>

#include "core/options.h"

namespace trident::optim {

struct LRScheduleOptions {
  std::string shape = "cosine";  // "cosine" or "constant"
  int64_t warmup_steps = 0;
  int64_t decay_steps = 0;       // cosine reaches min_lr here; 0 means the run's total steps
  double min_lr = 0.0;
  static const OptionTable<LRScheduleOptions>& table();
};

class LRSchedule {
 public:
  LRSchedule(const LRScheduleOptions& options, double max_lr, int64_t total_steps);
  double lr_at(int64_t step) const;

 private:
  LRScheduleOptions options_;
  double max_lr_;
  int64_t decay_steps_;
};

}  // namespace trident::optim
