#include "planner/calibration_timer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "core/check.h"
#include "core/cpu_time.h"
#include "core/factory.h"
#include "core/parallel.h"

namespace trident::planner {
namespace {

// CPU seconds of this process per thread: on a machine shared with other work a rank's CPU
// time is what its compute costs, where its wall time also counts the others' (the planner's
// accuracy bench compares step CPU times alike).
double cpu_seconds() { return process_cpu_seconds() / static_cast<double>(num_threads()); }

}  // namespace

// Note [Ranks measured together]
// A node's ranks share its cores' caches, memory and (on SMT siblings) execution units, and in
// a step they compute together: the collectives keep them in lock step. Each rate is therefore
// measured on every rank at once. Unsynchronized, the ranks drift apart within seconds and one
// rank's GEMMs can run beside the other's memory test: two 2-rank calibrations of tiny-moe on
// one Zen 4 host gave a peak of 98.5 and 117.5 GFLOP/s per rank at the same measured step times,
// where one rank alone measured 102-111. A barrier before each rate was not enough: each rank
// timed calls for its own span and kept its fastest, and a rank whose partner had ended its
// calls first kept a call that ran alone. So the ranks agree on a count of calls (what spans the
// item's time on the slowest rank's first call), and each item's time is the slowest rank's
// median call, as a step waits for its slowest rank. The median, not the fastest: a step is the
// sum of many calls, and the fastest step (what planner/measure.cc reports) is many calls'
// typical time, not each one's luckiest.
//
// Note [Rates timed in turns]
// This VM's speed drifts 10-20% over minutes, and the fits of calibrate (gemm_half_rows from the
// GEMMs at two micro-batches, gemm_half_k from two widths, the attention's fall-off from two head
// sizes) take the ratio of two rates: timed one after the other, a few percent of drift between
// them moved the fits far (six 2-rank calibrations of tiny-moe within ten minutes on one Zen 4
// host: gemm_half_rows 0-75, gemm_half_k 0-96, and the same measured rows from 20% under to 21%
// over at b1 m8). So every item is called in rounds, each round a share of its calls, the items
// in turn (as farm-bench times A and B), and its median is over all its calls: a drift slower
// than a round moves every rate alike, and their ratios not.

CalibrationTimer::CalibrationTimer(std::shared_ptr<comm::Communicator> comm, int rounds)
    : comm_(comm && comm->size() > 1 ? std::move(comm) : nullptr), rounds_(std::max(1, rounds)) {}

size_t CalibrationTimer::add(std::function<void()> f, double seconds) {
  items_.push_back(Item{std::move(f), seconds, 0, {}});
  return items_.size() - 1;
}

double slowest_rank(comm::Communicator* comm, double mine) {
  if (!comm || comm->size() <= 1) return mine;
  Tensor t = full({1}, mine, DType::kF64);
  comm->all_reduce(t, comm::ReduceOp::kMax);
  return t.item();
}

void CalibrationTimer::run() {
  const double min_calls_per_round = std::ceil(3.0 / static_cast<double>(rounds_));  // a median of 3 at least
  for (int round = 0; round < rounds_; ++round) {
    for (Item& item : items_) {
      if (round == 0) {
        item.f();  // warm-up: first touches, the engine's plans
        // The count spans `seconds` of the wall clock (with idle threads a call's CPU time per
        // thread is less than its wall time, and would ask for more calls).
        const auto t0 = std::chrono::steady_clock::now();
        item.f();
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double once = slowest_rank(comm_.get(), std::max(wall, 1e-9));
        item.calls_per_round = static_cast<int64_t>(
            std::clamp(std::ceil(item.seconds / rounds_ / once), min_calls_per_round, 1000.0));
      }
      if (comm_) comm_->barrier();
      for (int64_t i = 0; i < item.calls_per_round; ++i) {
        const double t0 = cpu_seconds();
        item.f();
        item.times.push_back(std::max(cpu_seconds() - t0, 1e-9));
      }
    }
  }
  medians_.assign(items_.size(), 0.0);
  for (size_t i = 0; i < items_.size(); ++i) {
    std::vector<double>& t = items_[i].times;
    std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(t.size() / 2), t.end());
    medians_[i] = t[t.size() / 2];
  }
  if (comm_ && !medians_.empty()) {  // every item's slowest rank, at once
    Tensor t = from_vector(medians_, Shape{static_cast<int64_t>(medians_.size())});
    comm_->all_reduce(t, comm::ReduceOp::kMax);
    medians_ = to_vector<double>(t);
  }
}

double CalibrationTimer::seconds(size_t i) const {
  TRI_CHECK_INDEX(i < medians_.size(), "CalibrationTimer::seconds(", i, "): ", medians_.size(),
                  " items timed (run() first)");
  return medians_[i];
}

}  // namespace trident::planner
