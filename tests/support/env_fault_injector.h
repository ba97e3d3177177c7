// The end-to-end tests' faults, read from the environment by `trident_with_faults` (the CLI
// with this injector installed: trident_with_faults.cc), never by `trident` itself
// (train/fault_injection.h).
//
// Note [Test hooks]
//   TRIDENT_TEST_NAN_BATCH=p        the batch at sampler position p (0-based; the first batch
//                                   of step p / grad_accum_steps + 1) gives a NaN loss and NaN
//                                   gradients (its backward seed is NaN), as an overflow would.
//   TRIDENT_TEST_SLEEP_BATCH=p:s[:r]  before the batch at position p, sleep s seconds (on rank
//                                   r only, else on every rank): a rank stuck in a step.
//   TRIDENT_TEST_SLEEP_COLLECTIVE=n:s[:r]  inside operation #n of the world communicator,
//                                   after MPI finished it and before it returns, sleep s
//                                   seconds (on rank r only, else on every rank): a rank stuck
//                                   inside a collective, still "in flight" in its flight record
//                                   while the others go on to #n+1 and wait there
//                                   (comm::FlightRecorder::sleep_inside).
// Keyed by the sampler position rather than the step, so that a rollback, which skips the
// batch, does not meet it again. Errors name the variable, its value and the form allowed.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "train/fault_injection.h"

namespace trident::testing {

class EnvFaultInjector final : public train::FaultInjector {
 public:
  // Reads the variables above; throws naming a variable whose value is malformed. Null when
  // none is set.
  static std::shared_ptr<EnvFaultInjector> from_env();

  bool before_batch(int64_t position, int rank) override;
  void at_start(int rank) override;

 private:
  std::optional<int64_t> nan_batch_;
  std::optional<int64_t> sleep_batch_;
  double sleep_s_ = 0.0;
  int sleep_rank_ = -1;  // -1: every rank
  std::optional<int64_t> sleep_collective_;  // the world communicator's sequence number
  double sleep_collective_s_ = 0.0;
  int sleep_collective_rank_ = -1;  // -1: every rank
};

}  // namespace trident::testing
