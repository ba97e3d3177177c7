#include "optim/lr_schedule.h"

#include <cmath>
#include <numbers>

#include "core/check.h"

namespace trident::optim {

const OptionTable<LRScheduleOptions>& LRScheduleOptions::table() {
  static const auto t =
      OptionTable<LRScheduleOptions>("lr_schedule", "Learning-rate warmup and decay")
          .add("shape", &LRScheduleOptions::shape, "decay after warmup", {"cosine", "constant"})
          .add("warmup_steps", &LRScheduleOptions::warmup_steps, "linear warmup steps", Range::non_negative())
          .add("decay_steps", &LRScheduleOptions::decay_steps,
               "step where cosine decay reaches min_lr (0: the run's total steps)", Range::non_negative())
          .add("min_lr", &LRScheduleOptions::min_lr, "learning rate at the end of the decay", Range::non_negative());
  return t;
}

LRSchedule::LRSchedule(const LRScheduleOptions& options, double max_lr, int64_t total_steps)
    : options_(options), max_lr_(max_lr), decay_steps_(options.decay_steps > 0 ? options.decay_steps : total_steps) {
  TRI_CHECK(options.min_lr <= max_lr, "lr_schedule: min_lr (", options.min_lr, ") must not exceed optim.lr (",
            max_lr, ")");
}

double LRSchedule::lr_at(int64_t step) const {
  const int64_t warmup = options_.warmup_steps;
  if (step < warmup) return max_lr_ * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (options_.shape == "constant") return max_lr_;
  if (step >= decay_steps_ || decay_steps_ <= warmup) return options_.min_lr;
  const double progress = static_cast<double>(step - warmup) / static_cast<double>(decay_steps_ - warmup);
  const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  return options_.min_lr + coeff * (max_lr_ - options_.min_lr);
}

}  // namespace trident::optim
