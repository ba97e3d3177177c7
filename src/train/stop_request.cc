#include "train/stop_request.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "comm/mpi_communicator.h"

namespace trident::train {
namespace {

// Lock-free, so the handler may touch it (async-signal-safe).
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);
bool g_under_mpirun = false;  // read at install: getenv is not for signal handlers

void on_stop_signal(int sig) {
  if (sig == SIGUSR2) {  // a second Ctrl-C at `trident launch`, forwarded by mpirun
    constexpr char kMsg[] = "\ninterrupted again (SIGUSR2 from trident launch): exiting now, without a checkpoint\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
    ::_exit(128 + SIGINT);
  }
  int expected = 0;
  if (g_stop_signal.compare_exchange_strong(expected, sig)) {
    // In an MPI job this is also how mpirun ends the survivors when a rank dies: then the
    // SIGKILL that follows leaves these as the rank's last words (Note [Distributed failures]).
    if (g_under_mpirun) {
      comm::MpiRuntime::write_last_words(sig == SIGTERM  ? "SIGTERM received, stopping at the next step boundary"
                                         : sig == SIGINT ? "SIGINT received, stopping at the next step boundary"
                                                         : "SIGUSR1 received, stopping at the next step boundary");
    } else {
      constexpr char kMsg[] = "\nstop requested: finishing this step, then writing a checkpoint (Ctrl-C again: exit now)\n";
      [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
    }
    return;
  }
  if (sig == SIGINT) {
    constexpr char kMsg[] = "\ninterrupted again: exiting now, without a checkpoint\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
    ::_exit(128 + SIGINT);
  }
}

}  // namespace

void install_stop_handlers() {
  g_under_mpirun = comm::MpiRuntime::launched_by_mpirun();
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a blocking read or MPI's poll resumes instead of failing with EINTR
  for (int sig : {SIGTERM, SIGINT, SIGUSR1, SIGUSR2}) ::sigaction(sig, &sa, nullptr);
}

int stop_signal() { return g_stop_signal.load(); }

void clear_stop_signal() { g_stop_signal.store(0); }

const char* stop_signal_name(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return "a signal";
  }
}

}  // namespace trident::train
