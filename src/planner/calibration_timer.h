// How `trident calibrate` times what it measures: the callables of every rate, added as items,
// called in rounds, every rank at once, and each item's median call on the slowest rank
// (Note [Ranks measured together], Note [Rates timed in turns] in calibration_timer.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace trident::planner {

// The largest of every rank's `mine` (a step waits for its slowest rank); `mine` without `comm`
// or with one rank. Collective.
double slowest_rank(comm::Communicator* comm, double mine);

class CalibrationTimer {
 public:
  // `comm`: the ranks that measure together (none, or one rank: this process alone); each item
  // is called in `rounds` turns.
  CalibrationTimer(std::shared_ptr<comm::Communicator> comm, int rounds);

  // Adds `f`, to be called for about `seconds` in all, over the rounds. Returns its index.
  size_t add(std::function<void()> f, double seconds);

  // Calls every item, round by round; collective. Each item's first call is a warm-up.
  void run();

  // After run(): item `i`'s median call in CPU seconds per thread, the slowest rank's.
  double seconds(size_t i) const;

 private:
  struct Item {
    std::function<void()> f;
    double seconds = 0.0;
    int64_t calls_per_round = 0;
    std::vector<double> times;
  };

  std::shared_ptr<comm::Communicator> comm_;
  int rounds_;
  std::vector<Item> items_;
  std::vector<double> medians_;
};

}  // namespace trident::planner
