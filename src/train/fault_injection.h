// Faults a run can be made to meet at chosen moments, for the tests of what must act on its
// own (the alert rules' NaN and spike handling, the hang watchdog, rollbacks): faults a real
// run meets rarely and never when asked. A seam, as the checkpoint Env is: a test program
// installs an injector before it trains (tests/support/env_fault_injector.h reads one from
// the environment for the end-to-end tests' `trident_with_faults`); the trainer asks the
// installed one, and with none installed (every real run, the `trident` CLI) nothing happens
// and nothing is read.
#pragma once

#include <cstdint>
#include <memory>

namespace trident::train {

class FaultInjector {
 public:
  virtual ~FaultInjector() = default;
  // On rank `rank`, before the batch at sampler position `position` is drawn (keyed by the
  // sampler's position rather than the step, so that a rollback, which skips the batch, does
  // not meet it again): whether that micro-batch's loss and gradients become NaN (its backward
  // seed is NaN), as an overflow would. It may block: a rank stuck in a step.
  virtual bool before_batch(int64_t position, int rank) = 0;
  // On rank `rank`, when the run starts, after its communicators exist (to arm faults inside
  // communication: comm::FlightRecorder::sleep_inside).
  virtual void at_start(int rank) = 0;
};

// The process's injector: null unless a test program installed one.
FaultInjector* fault_injector();
// Installs `injector` for every trainer this process creates afterwards (null: none).
void install_fault_injector(std::shared_ptr<FaultInjector> injector);

}  // namespace trident::train
