// RunLock: one run at a time per train.out_dir. An exclusive flock(2) on out_dir/.lock, held
// for as long as the RunLock lives; the file records who holds it (pid, host, start time), so
// a second run's error names the holder. Not here: waiting for the lock (a second run is
// refused at once); see Note [The out_dir lock] for filesystems and ranks.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"

namespace trident::train {

class RunLock {
 public:
  // Takes the lock of `dir` (which must exist), creating dir/.lock, and writes this process's
  // pid, host and time into it. Errors: kInvalid when another process holds it (the message
  // names the directory and the holder's record), kIO when the file cannot be opened or locked.
  // A process that already holds the lock of `dir` takes it again (the lock is the process's:
  // two Trainers of one process may run one after the other or side by side); it is released
  // when the last RunLock of the process on that file goes. Thread-safe.
  static StatusOr<RunLock> acquire(const std::string& dir);

  RunLock(RunLock&&) noexcept = default;
  RunLock& operator=(RunLock&&) noexcept = default;
  RunLock(const RunLock&) = delete;
  ~RunLock();

  // out_dir/.lock
  const std::string& path() const;

  struct Held;  // the open, locked file, shared by this process's RunLocks on it

 private:
  explicit RunLock(std::shared_ptr<Held> held) : held_(std::move(held)) {}
  std::shared_ptr<Held> held_;
};

}  // namespace trident::train
