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
#include <fstream>
#include <string>
#include <thread>

#include "commands.h"
#include "restart_policy.h"
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
  c->add_option("--max-restarts", a.max_restarts,
                "run a failed job again (it resumes from its newest checkpoint) up to this many times")
      ->check(CLI::Range(0, 1 << 20));
  c->add_option("--restart-window", a.restart_window_s,
                "count --max-restarts over the last this many seconds only (0: over the whole launch)")
      ->check(CLI::Range(0.0, 1e9));
  c->add_option("--restart-backoff", a.restart_backoff_s,
                "seconds to wait before the first restart, doubling for each restart in the window (at most 60)")
      ->check(CLI::Range(0.0, 3600.0));
  c->add_option("--min-ranks", a.min_ranks,
                "with --hostfile: restart on the hosts that answer with at least this many ranks (default: -n)")
      ->check(CLI::Range(1, 1 << 20));
  c->add_option("--host-check-timeout", a.host_check_timeout_s,
                "seconds a host has to answer the check before a restart")
      ->check(CLI::Range(0.1, 600.0));
  c->add_option("command", a.command, "the trident command to run on every rank, after --");
  c->footer(
      "Example: trident launch -n 4 -- train --config configs/fortunes.toml --train.threads=1\n"
      "SIGTERM or Ctrl-C: every rank finishes its step, the run writes a checkpoint and exits with status 75\n"
      "(run the same command again to resume); a second Ctrl-C ends the job at once.\n"
      "--max-restarts 3: a job that fails (a rank killed, a hang, status 1 or 75 that launch did not ask for)\n"
      "runs again and resumes from its newest checkpoint; 0, 78 and up (a config error, a rule's stop, a\n"
      "diverged run) and a stop sent to launch end it. With --hostfile and --min-ranks, a restart checks the\n"
      "hosts and runs on those that answer.");
  return c;
}

namespace {

// The mpirun command line for `ranks` ranks on `hostfile` ("" for this host only).
std::vector<std::string> mpirun_argv(const LaunchArgs& a, const std::string& self, int ranks,
                                     const std::string& hostfile) {
  std::vector<std::string> argv = {a.mpirun, "-np", std::to_string(ranks), "--bind-to", "none"};
  if (hostfile.empty()) {
    argv.push_back("--oversubscribe");  // one host: more ranks than cores is allowed (tests, small runs)
  } else {
    argv.insert(argv.end(), {"--hostfile", hostfile});
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
  argv.insert(argv.end(), a.command.begin(), a.command.end());
  return argv;
}

std::string joined(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& s : argv) line += (line.empty() ? "" : " ") + s;
  return line;
}

// The end of mpirun's stderr that launch keeps (failure_cause reads it).
constexpr size_t kOutputKept = 64 * 1024;

// Passes what is in `fd` on to launch's stderr, keeping the end of it in `kept`. Returns
// false at the end of the stream.
bool pass_on(int fd, std::string* kept) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) return false;
    if (n < 0) return errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK;
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = ::write(STDERR_FILENO, buf + done, static_cast<size_t>(n - done));
      if (w < 0 && errno != EINTR) break;
      if (w > 0) done += w;
    }
    kept->append(buf, static_cast<size_t>(n));
    if (kept->size() > 2 * kOutputKept) kept->erase(0, kept->size() - kOutputKept);
  }
}

// One attempt: runs mpirun and waits, passing signals on (Note [Launch and signals]).
Status run_job(const LaunchArgs& a, std::vector<std::string> argv, JobEnd* end) {
  std::fprintf(stderr, "launch: %s\n", joined(argv).c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<char*> cargv;
  for (std::string& s : argv) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0)
    return Status::io_error(std::string("launch: cannot start mpirun: pipe: ") + std::strerror(errno));

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(err_pipe[0]);
    ::close(err_pipe[1]);
    return Status::io_error(std::string("launch: cannot start mpirun: fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(128 + SIGTERM);  // launch died before prctl
    for (int sig : {SIGTERM, SIGINT, SIGUSR1}) ::signal(sig, SIG_DFL);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);  // dup2 clears O_CLOEXEC on the copy
    ::execvp(cargv[0], cargv.data());
    const std::string msg = "error: launch: cannot run '" + a.mpirun + "': " + std::strerror(errno) +
                            " (install OpenMPI: scripts/install-deps.sh)\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, msg.data(), msg.size());
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here: whichever of the two runs first
  ::close(err_pipe[1]);
  ::fcntl(err_pipe[0], F_SETFL, ::fcntl(err_pipe[0], F_GETFL) | O_NONBLOCK);

  // Wait, passing signals on: each stop request as SIGUSR1 (again for each new one, in case
  // one came before a rank was up: ranks ignore repeats), a later SIGINT as SIGUSR2 (every
  // rank exits at once), or as SIGTERM to mpirun while it may still be starting.
  const auto started = std::chrono::steady_clock::now();
  int status = 0, stops_passed = 0, interrupts_passed = 0;
  bool open = true;
  for (;;) {
    if (open) open = pass_on(err_pipe[0], &end->output);
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      ::close(err_pipe[0]);
      return Status::io_error(std::string("launch: waiting for mpirun: ") + std::strerror(errno));
    }
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
  if (open) pass_on(err_pipe[0], &end->output);  // what is left (a lingering writer: not waited for)
  ::close(err_pipe[0]);
  end->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  end->mpirun_missing = WIFEXITED(status) && end->status == 127 && end->output.find("error: launch: cannot run '") !=
                                                                        std::string::npos;
  if (end->mpirun_missing) end->status = 1;  // could not run mpirun: said so above
  end->stop_forwarded = g_stop_requests.load() > 0 || g_interrupts.load() > 0;
  return Status::ok();
}

// Waits `seconds`; false if a stop request came meanwhile.
bool wait_unless_stopped(double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (g_stop_requests.load() > 0 || g_interrupts.load() > 0) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return g_stop_requests.load() == 0 && g_interrupts.load() == 0;
}

// A hostfile of the hosts that answered, for a restart on fewer; removed with this object.
struct ReducedHostfile {
  std::string path;
  ~ReducedHostfile() {
    if (!path.empty()) ::unlink(path.c_str());
  }
};

}  // namespace

Status run_launch(const LaunchArgs& a, int* exit_code) {
  const std::vector<std::string>& rest = a.command;
  if (rest.empty()) return Status::invalid("launch: no command to run (e.g. trident launch -n 2 -- train ...)");
  if (rest.front() == "launch") return Status::invalid("launch: the command to run cannot be launch itself");
  const int min_ranks = a.min_ranks > 0 ? a.min_ranks : a.ranks;
  if (min_ranks > a.ranks)
    return Status::invalid("launch: --min-ranks " + std::to_string(min_ranks) + " is more than -n " +
                           std::to_string(a.ranks));
  if (min_ranks < a.ranks && a.hostfile.empty())
    return Status::invalid("launch: --min-ranks " + std::to_string(min_ranks) + " below -n " + std::to_string(a.ranks) +
                           " needs --hostfile (the hosts to check before a restart; on one host every rank can run)");
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) return Status::io_error("launch: cannot find this executable (/proc/self/exe): " + ec.message());
  if (a.dry_run) {
    std::printf("%s\n", joined(mpirun_argv(a, self, a.ranks, a.hostfile)).c_str());
    return Status::ok();
  }
  std::vector<HostEntry> hosts;
  if (!a.hostfile.empty() && a.max_restarts > 0) {
    auto h = read_hostfile(a.hostfile);
    if (!h.is_ok()) return h.status();
    hosts = std::move(h.value());
  }

  // Handlers first, so that a signal during the fork is not lost.
  install_forwarding();
  RestartBudget budget(a.max_restarts, a.restart_window_s, a.restart_backoff_s);
  const char* agent_env = std::getenv("OMPI_MCA_plm_rsh_agent");
  const std::string agent = agent_env != nullptr ? agent_env : "";
  const std::string window =
      a.restart_window_s > 0 ? " in the last " + std::to_string(static_cast<long long>(a.restart_window_s)) + " s" : "";
  ReducedHostfile reduced;
  int ranks = a.ranks;
  std::string hostfile = a.hostfile;
  for (;;) {
    JobEnd end;
    if (Status s = run_job(a, mpirun_argv(a, self, ranks, hostfile), &end); !s.is_ok()) return s;
    *exit_code = end.status;
    // Note [Restarts with fewer ranks]: a configuration error on fewer ranks than -n may be
    // the layout's; one rank fewer, at once.
    if (end.status == train::kExitConfigError && !end.stop_forwarded && ranks < a.ranks && ranks > min_ranks) {
      std::fprintf(stderr, "launch: exit status 78 (a configuration error) on %d ranks: the layout may not fit; trying %d\n",
                   ranks, ranks - 1);
      --ranks;
      continue;
    }
    const std::optional<std::string> why_not = why_no_restart(end);
    if (why_not || a.max_restarts == 0) {
      if (a.max_restarts > 0 && end.status != 0)
        std::fprintf(stderr, "launch: not restarting: %s\n", why_not->c_str());
      if (*exit_code == train::kExitStoppedEarly)
        std::fprintf(stderr, "launch: the run stopped early with a checkpoint (exit status %d): run the same command "
                             "again to resume\n", train::kExitStoppedEarly);
      return Status::ok();
    }
    std::string cause = failure_cause(end.output);
    cause = (cause.empty() ? "" : cause + "; ") + "mpirun: " + describe_status(end.status);
    // Until a restart can go ahead: one taken from the budget, the backoff waited, enough
    // hosts answering (Note [Restarts with fewer ranks]).
    for (;;) {
      const auto now = std::chrono::steady_clock::now();
      if (!budget.take(now)) {
        std::fprintf(stderr, "launch: giving up after %d restart(s)%s: the job failed (%s), last exit status %d\n",
                     budget.max(), window.c_str(), cause.c_str(), *exit_code);
        return Status::ok();
      }
      const double wait_s = budget.backoff_s(now);
      std::fprintf(stderr, "launch: the job failed (%s): restart %d of %d%s in %.1f s\n", cause.c_str(),
                   budget.used(now), budget.max(), window.c_str(), wait_s);
      std::fflush(stderr);
      if (!wait_unless_stopped(wait_s)) {
        std::fprintf(stderr, "launch: a stop request came before the restart: not restarting; the newest checkpoint "
                             "resumes when the same command runs again\n");
        *exit_code = train::kExitStoppedEarly;
        return Status::ok();
      }
      if (hosts.empty()) break;
      const std::vector<bool> up = check_hosts(hosts, agent, a.host_check_timeout_s);
      int slots = 0;
      std::string gone, lines;
      for (size_t i = 0; i < hosts.size(); ++i) {
        if (up[i]) {
          slots += hosts[i].slots;
          lines += hosts[i].line + "\n";
        } else {
          gone += (gone.empty() ? "" : ", ") + hosts[i].name;
        }
      }
      if (slots < min_ranks) {
        cause = std::to_string(slots) + " rank(s) can run (hosts not answering: " + gone + "), fewer than --min-ranks " +
                std::to_string(min_ranks);
        continue;
      }
      ranks = std::min(slots, a.ranks);
      if (gone.empty()) {
        hostfile = a.hostfile;
      } else {
        reduced.path = (std::filesystem::temp_directory_path(ec) / ("trident_launch_hostfile." +
                                                                    std::to_string(::getpid()))).string();
        std::ofstream(reduced.path) << lines;
        hostfile = reduced.path;
        std::fprintf(stderr, "launch: hosts not answering: %s; restarting with %d rank(s)\n", gone.c_str(), ranks);
      }
      break;
    }
  }
}

}  // namespace trident::cli
