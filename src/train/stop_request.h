// Preemption: signals that ask a run to stop at the next step boundary, write a checkpoint
// and exit (Note [Preemption] in trainer.cc). Clusters preempt with SIGTERM (Slurm,
// Kubernetes), people with Ctrl-C (SIGINT); `trident launch` forwards either to every rank as
// SIGUSR1, which mpirun passes on (it answers SIGTERM by killing the job within 2 s), and a
// second Ctrl-C as SIGUSR2.
//
// The handlers only record the signal: the training loop reads it between steps, and the
// ranks agree on it there, so no rank ever leaves a collective half done.
#pragma once

#include <signal.h>

#include <chrono>

namespace trident::train {

// A run that stopped early with a checkpoint exits with this status (sysexits' EX_TEMPFAIL:
// "try again later"): rerunning the same command resumes it.
inline constexpr int kExitStoppedEarly = 75;
// A rank whose hang rule fired with the action stop exits with this status, without a
// checkpoint (Note [Hang actions] in train/run_monitor.cc).
inline constexpr int kExitHung = 76;
// Note [Exit statuses]
// What a supervisor (a requeueing scheduler, `trident launch`) may do with each status of
// `trident train`: 0 done; 1 an error (a retry may help: a lost host, a full disk); 75 and 76
// run the same command again (it resumes from the newest checkpoint); 78 and up: running the
// same command again would end the same way, so do not. The README's table lists every status
// the CLI has (launch's 3, CLI11's 105 and 109, 130 for a second Ctrl-C among them).
inline constexpr int kExitConfigError = 78;    // a config file, key or flag value is wrong (sysexits' EX_CONFIG)
inline constexpr int kExitStoppedByRule = 79;  // an alert rule's stop (or pause without a server) ended the run
inline constexpr int kExitDiverged = 80;       // non-finite loss with no rule to act, or rollbacks spent

// Installs handlers for SIGTERM, SIGINT and SIGUSR1: the first asks for a stop; a SIGINT after
// that ends the process at once with status 130 (Ctrl-C twice), other repeats are ignored
// (a scheduler may send SIGTERM to every process and the forwarded SIGUSR1 arrives as well).
// SIGUSR2 (launch's second Ctrl-C, forwarded by mpirun) ends the process at once, with 130.
// Idempotent.
void install_stop_handlers();

// Note [Stop signals on their own thread]
// A handler runs on a thread the kernel picks, and interrupts what that thread was in: a
// blocking call returns early (EINTR, or a partial transfer). Code we do not own, MPI's
// shared-memory transfers among it, need not survive that: 2-rank runs sent SIGTERM mid-step
// aborted in free() or resumed to NaN losses, in CI only. So `trident train` blocks the stop
// signals in every thread (threads inherit the mask: call this first in main, before any
// thread starts) and leaves them to one thread that does nothing but take them; the handlers
// are unchanged and run there. Idempotent.
void route_stop_signals_to_own_thread();

// The signal that asked for a stop (SIGTERM, SIGINT or SIGUSR1), or 0.
int stop_signal();

// Forgets a received signal (tests, and a trainer run after a stopped one in one process).
void clear_stop_signal();

// "SIGTERM", "SIGINT", "SIGUSR1" (or "a signal").
const char* stop_signal_name(int signal);

// When this process started (as near as a program can tell: its static initialization), for
// train.max_runtime's budget.
std::chrono::steady_clock::time_point process_start_time();

// Tests: installs the stop handlers and restores the dispositions they replaced (and forgets
// any stop request) when it goes out of scope.
class ScopedStopHandlers {
 public:
  ScopedStopHandlers();
  ~ScopedStopHandlers();
  ScopedStopHandlers(const ScopedStopHandlers&) = delete;
  ScopedStopHandlers& operator=(const ScopedStopHandlers&) = delete;

 private:
  struct sigaction saved_[4];
};

}  // namespace trident::train
