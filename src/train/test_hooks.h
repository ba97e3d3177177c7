// Test hooks read from the environment, for end-to-end tests of the alert rules: faults that
// a real run meets rarely and at no chosen moment (a NaN, a rank stuck in a step). Unset, as
// in every real run, they change nothing.
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
#include <optional>

namespace trident::train {

struct TestHooks {
  std::optional<int64_t> nan_batch;
  std::optional<int64_t> sleep_batch;
  double sleep_s = 0.0;
  int sleep_rank = -1;  // -1: every rank
  std::optional<int64_t> sleep_collective;  // the world communicator's sequence number
  double sleep_collective_s = 0.0;
  int sleep_collective_rank = -1;  // -1: every rank
  static TestHooks from_env();
};

}  // namespace trident::train
