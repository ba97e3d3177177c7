#include "train/stop_request.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <thread>

#include "comm/mpi_communicator.h"

namespace trident::train {
namespace {

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGUSR1, SIGUSR2};

// Lock-free, so the handler may touch it (async-signal-safe).
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);
bool g_under_mpirun = false;  // read at install: getenv is not for signal handlers
const std::chrono::steady_clock::time_point g_process_start = std::chrono::steady_clock::now();

void say(const char* text, size_t size) { [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, text, size); }

void on_stop_signal(int sig) {
  const int saved_errno = errno;  // the interrupted code may be about to read it
  if (sig == SIGUSR2) {           // a second Ctrl-C at `trident launch`, forwarded by mpirun
    constexpr char kMsg[] = "\ninterrupted again (SIGUSR2 from trident launch): exiting now, without a checkpoint\n";
    say(kMsg, sizeof kMsg - 1);
    ::_exit(128 + SIGINT);
  }
  int expected = 0;
  if (g_stop_signal.compare_exchange_strong(expected, sig)) {
    if (g_under_mpirun) {
      // mpirun also ends the survivors of a failed rank with SIGTERM (then SIGKILL): these
      // are then the rank's last words, naming what it was in (Note [Distributed failures]).
      comm::MpiRuntime::write_last_words(
          sig == SIGTERM  ? "SIGTERM received (preemption, or the launcher ending the job): stopping at the next step"
          : sig == SIGINT ? "SIGINT received: stopping at the next step"
                          : "SIGUSR1 received (a stop forwarded by trident launch or mpirun): stopping at the next step");
    } else {
      constexpr char kMsg[] = "\nstop requested: finishing this step, then writing a checkpoint (Ctrl-C again: exit now)\n";
      say(kMsg, sizeof kMsg - 1);
    }
  } else if (sig == SIGINT) {
    constexpr char kMsg[] = "\ninterrupted again: exiting now, without a checkpoint\n";
    say(kMsg, sizeof kMsg - 1);
    ::_exit(128 + SIGINT);
  }
  errno = saved_errno;
}

}  // namespace

void install_stop_handlers() {
  g_under_mpirun = comm::MpiRuntime::launched_by_mpirun();
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a blocking read or MPI's poll resumes instead of failing with EINTR
  for (int sig : kSignals) ::sigaction(sig, &sa, nullptr);
}

void route_stop_signals_to_own_thread() {
  static std::once_flag once;
  std::call_once(once, [] {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : kSignals) sigaddset(&set, sig);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);  // this thread, and every thread it starts from now on
    std::thread([set] {
      pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
      for (;;) ::pause();  // returns after each handler
    }).detach();
  });
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

std::chrono::steady_clock::time_point process_start_time() { return g_process_start; }

ScopedStopHandlers::ScopedStopHandlers() {
  for (size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], nullptr, &saved_[i]);
  install_stop_handlers();
  clear_stop_signal();
}

ScopedStopHandlers::~ScopedStopHandlers() {
  for (size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], &saved_[i], nullptr);
  clear_stop_signal();
}

}  // namespace trident::train
