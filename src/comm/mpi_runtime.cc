// MpiRuntime (comm/mpi_communicator.h): MPI's start and end, the collectives' timeout, the
// progress thread, and each rank's last words when the job ends it.
#include <mpi.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "comm/mpi_communicator.h"
#include "comm/mpi_support.h"
#include "core/check.h"

namespace trident::comm {
namespace {

using mpi_support::mpi_error;
using mpi_support::progress_thread_from_env;
using mpi_support::timeout_from_env;

// Note [Distributed failures]
// A rank that dies (killed, crashed) is noticed by mpirun, which names it ("process rank 2
// ... exited on signal 9") and terminates the others with SIGTERM: our handler then prints,
// on each survivor, the operation it was in (recorded below before every start and wait), so
// every rank's last words say what it was doing. A rank that stays alive but stops taking
// part (a hang) is caught by the timeout of wait(): it names the operation and the
// communicator, then MPI_Abort ends the job. Either way no rank waits forever.
char g_current_op[192] = "no communication yet";
double g_timeout_s = 300.0;
int g_world_rank = -1;
int g_world_size = 1;

// Async-signal-safe (no snprintf, no allocation): a signal handler's last words.
void last_words(const char* what) {
  if (g_world_rank < 0) return;
  char line[448];
  size_t n = 0;
  auto put = [&](const char* s) {
    while (*s != '\0' && n + 2 < sizeof line) line[n++] = *s++;
  };
  char digits[16];
  int len = 0;
  for (int r = g_world_rank; len == 0 || r > 0; r /= 10) digits[len++] = static_cast<char>('0' + r % 10);
  put("trident (rank ");
  while (len > 0 && n + 2 < sizeof line) line[n++] = digits[--len];
  put("): ");
  put(what);
  put(" while ");
  put(g_current_op);
  line[n++] = '\n';
  [[maybe_unused]] const auto w = ::write(2, line, n);
}

extern "C" void on_terminate(int sig) {
  last_words(sig == SIGTERM ? "stopped by signal 15 from the launcher (another rank failed?)"
                            : "stopped by signal 2 from the launcher (another rank failed?)");
  std::_Exit(128 + sig);
}

// Note [The progress thread]
// MPI's non-blocking collectives (libnbc's schedules over shared memory or TCP) advance only
// while some thread is inside MPI: data parallelism polls them from its gradient hooks, but a
// long GEMM between two hooks leaves them idle, and the rest waits at the end of the backward
// (StepMetrics::comm_wait_s, the exposed communication). With TRIDENT_COMM_PROGRESS_THREAD=1
// the job runs MPI_THREAD_MULTIPLE and each rank starts a thread that enters MPI's progress
// engine (MPI_Iprobe on a communicator of its own, which no message ever matches) every
// 100 us until MPI_Finalize, so collectives progress while the backward computes. It costs a
// little CPU and MPI's locking, hence opt-in.
std::atomic<bool> g_progress_stop{false};
std::thread g_progress_thread;  // joined by finalize_at_exit, before its destructor runs
MPI_Comm g_progress_comm = MPI_COMM_NULL;

void start_progress_thread() {
  MPI_Comm_dup(MPI_COMM_WORLD, &g_progress_comm);
  g_progress_thread = std::thread([] {
    while (!g_progress_stop.load(std::memory_order_relaxed)) {
      int flag = 0;
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, g_progress_comm, &flag, MPI_STATUS_IGNORE);
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  });
}

void finalize_at_exit() {
  if (g_progress_thread.joinable()) {
    g_progress_stop = true;
    g_progress_thread.join();
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    if (g_progress_comm != MPI_COMM_NULL) MPI_Comm_free(&g_progress_comm);
    MPI_Finalize();
  }
}

}  // namespace

namespace mpi_support {

double timeout_from_env(const char* value) {
  char* end = nullptr;
  const double seconds = std::strtod(value, &end);
  TRI_CHECK(end != value && *end == '\0' && std::isfinite(seconds) && seconds > 0, "TRIDENT_COMM_TIMEOUT_S=\"",
            value, "\" is not allowed: a number of seconds > 0 (the collectives' timeout)");
  return seconds;
}

bool progress_thread_from_env(const char* value) {
  if (value == nullptr || *value == '\0') return false;
  TRI_CHECK(std::strcmp(value, "0") == 0 || std::strcmp(value, "1") == 0, "TRIDENT_COMM_PROGRESS_THREAD=\"", value,
            "\" is not allowed: 0 or 1");
  return value[0] == '1';
}
void note_op(const char* verb, const std::string& what) {
  std::snprintf(g_current_op, sizeof g_current_op, "%s %s", verb, what.c_str());
}

double timeout_seconds() { return g_timeout_s; }
int world_rank() { return g_world_rank; }
int world_size() { return g_world_size; }

}  // namespace mpi_support

void MpiRuntime::init(int* argc, char*** argv) {
  if (initialized()) return;
  int provided = 0;
  const bool progress_thread = progress_thread_from_env(std::getenv("TRIDENT_COMM_PROGRESS_THREAD"));
  const int rc = MPI_Init_thread(argc, argv, progress_thread ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED, &provided);
  TRI_CHECK_KIND(ErrorKind::kDistributed, rc == MPI_SUCCESS, "MPI_Init_thread failed: ", mpi_error(rc));
  TRI_CHECK_KIND(ErrorKind::kDistributed, !progress_thread || provided == MPI_THREAD_MULTIPLE,
                 "TRIDENT_COMM_PROGRESS_THREAD=1 needs MPI_THREAD_MULTIPLE; this MPI provides thread level ", provided);
  std::atexit(finalize_at_exit);
  if (progress_thread) start_progress_thread();  // Note [The progress thread]
  MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_world_size);
  if (const char* t = std::getenv("TRIDENT_COMM_TIMEOUT_S")) set_timeout(timeout_from_env(t));
  // Note [Distributed failures]: last words when the launcher ends this rank, unless the
  // program handles these signals itself (`trident train` stops at a step boundary on them,
  // and writes the same last words).
  for (int sig : {SIGTERM, SIGINT}) {
    struct sigaction current {};
    if (::sigaction(sig, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) std::signal(sig, on_terminate);
  }
}

void MpiRuntime::write_last_words(const char* what) { last_words(what); }

bool MpiRuntime::initialized() {
  int flag = 0;
  MPI_Initialized(&flag);
  return flag != 0;
}

void MpiRuntime::set_timeout(double seconds) {
  TRI_CHECK(seconds > 0, "communication timeout must be positive, got ", seconds, " s");
  g_timeout_s = seconds;
}

double MpiRuntime::timeout() { return g_timeout_s; }

bool MpiRuntime::launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr ||
         std::getenv("PMI_SIZE") != nullptr;
}

int MpiRuntime::launcher_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* v = std::getenv(var)) return std::atoi(v);
  return 0;
}

void MpiRuntime::abort(int code) {
  if (initialized()) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Abort(MPI_COMM_WORLD, code);
  }
  std::_Exit(code);
}

}  // namespace trident::comm
