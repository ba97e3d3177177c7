// `trident launch`: mpirun with trident's flags, and signals passed on so that a preempted
// job stops with a checkpoint instead of being killed.
//
// Note [Launch and signals]
// mpirun answers SIGTERM or SIGINT by killing the job: SIGTERM to every rank after a second,
// SIGKILL after another (OpenMPI 4's odls_base_sigkill_timeout), too soon to finish a step and
// write a checkpoint. It forwards SIGUSR1 to every rank untouched, on every host. So launch
// runs mpirun as a child in a process group of its own (a Ctrl-C in the terminal reaches
// launch alone) and turns the first SIGTERM, SIGINT or SIGUSR1 into a SIGUSR1 for mpirun
// (held until mpirun has started its processes, so has set up its forwarding); each rank then stops at
// the next step boundary (Note [Preemption] in train/trainer.cc). A second SIGINT is passed
// on as SIGUSR2, on which every rank exits at once (mpirun's own SIGTERM would take two
// seconds to reach them). A scheduler that signals mpirun itself (Slurm signals every
// process of a job) gets mpirun's behaviour: the job ends within two seconds. If launch itself is
// killed, mpirun is sent SIGTERM (PR_SET_PDEATHSIG) rather than left running. mpirun's stdin
// is /dev/null: a background process group must not read the terminal.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <string>

#include "commands.h"
#include "train/stop_request.h"

namespace trident::cli {
namespace {

// What the handler saw; the wait loop below passes it on (Note [Launch and signals]).
std::atomic<int> g_stop_requests{0};  // SIGTERM, SIGUSR1, or a first SIGINT
std::atomic<int> g_interrupts{0};     // a SIGINT after a stop request

void on_signal(int sig) {
  const int saved_errno = errno;
  if (sig == SIGINT && g_stop_requests.load() > 0) ++g_interrupts;
  else ++g_stop_requests;
  errno = saved_errno;
}

void install_forwarding() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGINT, SIGUSR1}) ::sigaction(sig, &sa, nullptr);
}

// mpirun forwards SIGUSR1 once it has set itself up; before that the signal's default action
// would end it. It has, once it has started processes of its own (the local ranks, or the
// remote daemons' ssh); where /proc cannot tell, after a grace period. Ranks install their
// handlers first thing in main().
constexpr std::chrono::milliseconds kStartupGrace{2000};

bool mpirun_is_ready(pid_t pid, std::chrono::steady_clock::duration running) {
  if (running >= 5 * kStartupGrace) return true;
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children").c_str(), "r");
  if (f == nullptr) return running >= kStartupGrace;
  const int c = std::fgetc(f);
  std::fclose(f);
  return c != EOF;
}

}  // namespace

CLI::App* add_launch(CLI::App& app, LaunchArgs& a) {
  CLI::App* c = app.add_subcommand("launch", "Run a trident command on several ranks through mpirun");
  c->add_option("-n,--ranks", a.ranks, "number of ranks")->required()->check(CLI::Range(1, 1 << 20));
  c->add_option("--hostfile", a.hostfile, "mpirun hostfile (several hosts); default: this host only")
      ->check(CLI::ExistingFile);
  c->add_option("--mpirun", a.mpirun, "the mpirun to use");
  c->add_flag("--dry-run", a.dry_run, "print the mpirun command instead of running it");
  c->add_option("command", a.command, "the trident command to run on every rank, after --");
  c->footer(
      "Example: trident launch -n 4 -- train --config configs/fortunes.toml --train.threads=1\n"
      "SIGTERM or Ctrl-C: every rank finishes its step, the run writes a checkpoint and exits with status 75\n"
      "(run the same command again to resume); a second Ctrl-C ends the job at once.");
  return c;
}

Status run_launch(const LaunchArgs& a, int* exit_code) {
  std::vector<std::string> rest = a.command;
  if (rest.empty()) return Status::invalid("launch: no command to run (e.g. trident launch -n 2 -- train ...)");
  if (rest.front() == "launch") return Status::invalid("launch: the command to run cannot be launch itself");
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) return Status::io_error("launch: cannot find this executable (/proc/self/exe): " + ec.message());
  std::vector<std::string> argv = {a.mpirun, "-np", std::to_string(a.ranks), "--bind-to", "none"};
  if (a.hostfile.empty()) {
    argv.push_back("--oversubscribe");  // one host: more ranks than cores is allowed (tests, small runs)
  } else {
    argv.insert(argv.end(), {"--hostfile", a.hostfile});
    // Other hosts start with their own environment (ssh's): pass on what configures trident
    // (TRIDENT_COMM_TIMEOUT_S, ...) and its threads, as mpirun does for OMPI_* itself.
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string var(*e);
      const std::string name = var.substr(0, var.find('='));
      if (name.rfind("TRIDENT_", 0) == 0 || name == "OMP_NUM_THREADS") argv.insert(argv.end(), {"-x", name});
    }
  }
  if (::geteuid() == 0) {
    // OpenMPI refuses to run as root unless told twice; pass it on to remote hosts too.
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    argv.insert(argv.end(), {"-x", "OMPI_ALLOW_RUN_AS_ROOT", "-x", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"});
  }
  argv.push_back(self);
  argv.insert(argv.end(), rest.begin(), rest.end());
  std::string line;
  for (const std::string& s : argv) line += (line.empty() ? "" : " ") + s;
  if (a.dry_run) {
    std::printf("%s\n", line.c_str());
    return Status::ok();
  }
  std::fprintf(stderr, "launch: %s\n", line.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<char*> cargv;
  for (std::string& s : argv) cargv.push_back(s.data());
  cargv.push_back(nullptr);

  // Handlers first, so that a signal during the fork is not lost.
  install_forwarding();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return Status::io_error(std::string("launch: cannot start mpirun: fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(128 + SIGTERM);  // launch died before prctl
    for (int sig : {SIGTERM, SIGINT, SIGUSR1}) ::signal(sig, SIG_DFL);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    ::execvp(cargv[0], cargv.data());
    const std::string msg = "error: launch: cannot run '" + a.mpirun + "': " + std::strerror(errno) +
                            " (install OpenMPI: scripts/install-deps.sh)\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, msg.data(), msg.size());
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here: whichever of the two runs first

  // Wait, passing signals on: each stop request as SIGUSR1 (again for each new one, in case
  // one came before a rank was up: ranks ignore repeats), a later SIGINT as SIGUSR2 (every
  // rank exits at once), or as SIGTERM to mpirun while it may still be starting.
  const auto started = std::chrono::steady_clock::now();
  int status = 0, stops_passed = 0, interrupts_passed = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR)
      return Status::io_error(std::string("launch: waiting for mpirun: ") + std::strerror(errno));
    const bool ready = mpirun_is_ready(pid, std::chrono::steady_clock::now() - started);
    if (const int n = g_interrupts.load(); n > interrupts_passed) {
      ::kill(pid, ready ? SIGUSR2 : SIGTERM);
      interrupts_passed = n;
    } else if (const int m = g_stop_requests.load(); ready && m > stops_passed) {
      ::kill(pid, SIGUSR1);
      stops_passed = m;
    }
    ::usleep(20000);
  }
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (*exit_code == 127 && WIFEXITED(status)) *exit_code = 1;  // could not run mpirun: said so above
  if (*exit_code == train::kExitStoppedEarly)
    std::fprintf(stderr, "launch: the run stopped early with a checkpoint (exit status %d): run the same command "
                         "again to resume\n", train::kExitStoppedEarly);
  return Status::ok();
}

}  // namespace trident::cli
