// What `trident launch --max-restarts` decides between attempts of a job (apps/launch.cc runs
// them): whether an exit status may be restarted, what ended the job as mpirun told it, how
// many restarts are left in the window and how long to wait, and which hosts of a hostfile can
// run ranks now. Pure logic and small processes (the host checks); no mpirun here.
//
// Note [Restarts]
// torchelastic's idea, for mpirun jobs: when a job fails, run the same command again; it
// resumes from the newest complete checkpoint in train.out_dir (train.resume, on by default;
// the checkpoints reshard to any layout, and metrics.jsonl is reconciled to the checkpoint's
// step), so a restart costs the steps since that checkpoint. What restarts (Note [Exit
// statuses] in train/stop_request.h):
//   - a rank killed or crashed: mpirun ends the job (128 + the signal, or the rank's status);
//   - 1, an error a retry may get past (a lost host, a full disk that was cleared);
//   - 75, a stop with a checkpoint that launch did not ask for (a scheduler signalling the
//     ranks themselves), and 76, a hang that the hang rule ended.
// What does not: 0 (done); 78 and up below 128 (a configuration error 78, a rule's stop 79, a
// diverged run 80, CLI11's 105 and 109: running again would do the same thing); any status
// after launch itself passed on a stop request (SIGTERM, SIGINT, SIGUSR1 to launch: whoever
// sent it wants the job stopped); a 75 whose cause was train.max_runtime (the budget is the
// allocation's: a restart would run past it); mpirun that could not be started.
//
// Restarts are counted over the whole launch, or with --restart-window over the last window
// only (a long run that fails now and then never runs out); the wait before each restart
// doubles from --restart-backoff up to a minute.
//
// Note [Restarts with fewer ranks]
// With a hostfile, each host is checked before a restart (the agent mpirun itself reaches it
// with: $OMPI_MCA_plm_rsh_agent, else ssh, running `true` with a timeout; this host needs no
// check), and the job restarts on the hosts that answered with as many ranks as their slots
// hold, up to -n: at least --min-ranks, else launch waits out another backoff and counts it
// as a restart. Whether a count fits the run's layout (tp x pp dividing the ranks,
// data.batch_size divisible by the data-parallel degree) only the run knows: an attempt with
// fewer ranks than -n that ends with a configuration error (78) is tried again at once with
// one rank fewer, down to --min-ranks. data.batch_size is the global batch (each of dp ranks
// trains on batch_size / dp sequences of it) and the sampler's position is the global one,
// so the run sees the same tokens in the same order on any number of ranks; only the
// reduction order changes (losses within float rounding, not bit for bit). Dropout masks are
// drawn per rank, so a run with model.dropout > 0 takes another (equally valid) path.
#pragma once

#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace trident::cli {

// How one attempt of the job ended.
struct JobEnd {
  int status = 0;               // mpirun's exit status (128 + signal when a signal ended it)
  bool stop_forwarded = false;  // launch passed on a stop request of its own
  bool mpirun_missing = false;  // mpirun could not be started at all
  std::string output;           // the end of mpirun's stderr (the ranks' and its own)
};

// nullopt: restart. Otherwise why not, for the log line ("exit status 79: an alert rule
// stopped the run"). See Note [Restarts].
std::optional<std::string> why_no_restart(const JobEnd& end);

// What mpirun said ended the job, from its stderr: "rank 1 on node vm: signal 9 (Killed)",
// "rank 1: exit status 76", "rank 0 called MPI_Abort with 78"; "" when it said nothing
// recognisable.
std::string failure_cause(std::string_view mpirun_output);

// "exit status 1", "signal 9 (SIGKILL)" for 137.
std::string describe_status(int status);

// Restarts used and left. max_restarts restarts in all, or with window_s > 0 within any
// window_s seconds.
class RestartBudget {
 public:
  using Clock = std::chrono::steady_clock;
  RestartBudget(int max_restarts, double window_s, double backoff_s)
      : max_(max_restarts), window_s_(window_s), backoff_s_(backoff_s) {}
  // Whether one more restart is allowed now; if so, counts it.
  bool take(Clock::time_point now);
  // Restarts counted (in the window, when there is one).
  int used(Clock::time_point now);
  // The wait before the restart just taken: backoff_s x 2^(used - 1), at most 60 s.
  double backoff_s(Clock::time_point now);
  int max() const { return max_; }

 private:
  void forget_old(Clock::time_point now);
  int max_;
  double window_s_, backoff_s_;
  std::deque<Clock::time_point> taken_;
};

// One line of an OpenMPI hostfile: "h1 slots=4" (no slots= counts as 1).
struct HostEntry {
  std::string name;
  int slots = 1;
  std::string line;  // as written (max_slots= and the rest kept)
};
StatusOr<std::vector<HostEntry>> read_hostfile(const std::string& path);

// Checks every host at once (Note [Restarts with fewer ranks]): true for a host that answered
// within timeout_s. `agent`: the command that reaches a host (split on spaces), "" for ssh.
std::vector<bool> check_hosts(const std::vector<HostEntry>& hosts, const std::string& agent, double timeout_s);

}  // namespace trident::cli
