// See restart_policy.h, Note [Restarts] and Note [Restarts with fewer ranks].
#include "restart_policy.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "train/stop_request.h"

namespace trident::cli {

std::string describe_status(int status) {
  if (status > 128 && status < 128 + 65) {
    const int sig = status - 128;
    const char* name = sigabbrev_np(sig);
    return "signal " + std::to_string(sig) + (name ? std::string(" (SIG") + name + ")" : std::string());
  }
  return "exit status " + std::to_string(status);
}

std::optional<std::string> why_no_restart(const JobEnd& end) {
  const int s = end.status;
  if (end.mpirun_missing) return std::string("mpirun could not be started");
  if (s == 0) return std::string("the run finished");
  if (end.stop_forwarded) return describe_status(s) + " after launch passed on a stop request";
  switch (s) {
    case train::kExitConfigError: return std::string("exit status 78: a configuration error");
    case train::kExitStoppedByRule: return std::string("exit status 79: an alert rule stopped the run");
    case train::kExitDiverged: return std::string("exit status 80: the run diverged");
    case 105: return std::string("exit status 105: a command-line error");
    case 109: return std::string("exit status 109: a --config file that is not there");
    default: break;
  }
  if (s >= 78 && s < 128) return describe_status(s) + ": running again would do the same (Note [Exit statuses])";
  // The rank's words in trainer.cc (Note [Preemption]): the run's own time budget ran out.
  if (s == train::kExitStoppedEarly && end.output.find("train.max_runtime = \"") != std::string::npos &&
      end.output.find("would run out") != std::string::npos)
    return std::string("exit status 75: train.max_runtime ran out (a restart would run past it)");
  return std::nullopt;
}

std::string failure_cause(std::string_view out) {
  const std::string text(out);
  std::smatch m;
  // OpenMPI 4's words (orte/mca/errmgr and ompi/runtime): the first process to fail.
  static const std::regex signalled(R"(process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)( \([^)]*\))?)");
  static const std::regex exited(R"(Process name: \[\[\d+,\d+\],(\d+)\]\s*\n\s*Exit code:\s*(\d+))");
  static const std::regex aborted(R"(MPI_ABORT was invoked on rank (\d+) in communicator \S+\s*\nwith errorcode (\d+))");
  static const std::regex lost(R"(ORTE has lost communication with a remote daemon[\s\S]*?(?:HNP daemon|Remote host)\s*:\s*(\S+))");
  if (std::regex_search(text, m, signalled))
    return "rank " + m[1].str() + " on node " + m[2].str() + ": signal " + m[3].str() + m[4].str();
  if (std::regex_search(text, m, exited)) return "rank " + m[1].str() + ": exit status " + m[2].str();
  if (std::regex_search(text, m, aborted)) return "rank " + m[1].str() + " aborted with " + m[2].str();
  if (std::regex_search(text, m, lost)) return "lost the daemon of host " + m[1].str();
  return "";
}

void RestartBudget::forget_old(Clock::time_point now) {
  if (window_s_ <= 0) return;
  const auto window = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(window_s_));
  while (!taken_.empty() && now - taken_.front() > window) taken_.pop_front();
}

bool RestartBudget::take(Clock::time_point now) {
  forget_old(now);
  if (static_cast<int>(taken_.size()) >= max_) return false;
  taken_.push_back(now);
  return true;
}

int RestartBudget::used(Clock::time_point now) {
  forget_old(now);
  return static_cast<int>(taken_.size());
}

double RestartBudget::backoff_s(Clock::time_point now) {
  const int n = std::max(used(now), 1);
  return std::min(60.0, backoff_s_ * std::ldexp(1.0, std::min(n - 1, 16)));
}

StatusOr<std::vector<HostEntry>> read_hostfile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::io_error("launch: cannot read the hostfile '" + path + "'");
  std::vector<HostEntry> hosts;
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    std::string body = line.substr(0, line.find('#'));
    std::istringstream words(body);
    HostEntry h;
    if (!(words >> h.name)) continue;
    h.line = body;
    for (std::string w; words >> w;) {
      if (w.rfind("slots=", 0) != 0) continue;
      char* end = nullptr;
      const long v = std::strtol(w.c_str() + 6, &end, 10);
      if (*end != '\0' || v < 1 || v > (1 << 20))
        return Status::invalid("launch: hostfile '" + path + "' line " + std::to_string(n) + ": '" + w +
                               "' is not slots=N with N >= 1");
      h.slots = static_cast<int>(v);
    }
    hosts.push_back(h);
  }
  return hosts;
}

namespace {

bool is_this_host(const std::string& name) {
  char self[256] = {};
  ::gethostname(self, sizeof self - 1);
  return name == "localhost" || name == "127.0.0.1" || name == self;
}

}  // namespace

std::vector<bool> check_hosts(const std::vector<HostEntry>& hosts, const std::string& agent, double timeout_s) {
  std::vector<std::string> base;
  std::istringstream words(agent.empty() ? std::string("ssh") : agent);
  for (std::string w; words >> w;) base.push_back(w);
  const int connect_s = std::max(1, static_cast<int>(timeout_s));
  std::vector<bool> up(hosts.size(), false);
  std::vector<pid_t> pids(hosts.size(), -1);
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (is_this_host(hosts[i].name)) {
      up[i] = true;
      continue;
    }
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), {"-o", "BatchMode=yes", "-o", "ConnectTimeout=" + std::to_string(connect_s),
                             hosts[i].name, "true"});
    std::vector<char*> cargv;
    for (std::string& s : argv) cargv.push_back(s.data());
    cargv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);  // its own group: a timeout ends the agent and what it started
      for (int fd : {STDIN_FILENO, STDOUT_FILENO}) {
        const int null_fd = ::open("/dev/null", O_RDWR);
        if (null_fd >= 0) ::dup2(null_fd, fd);
      }
      ::execvp(cargv[0], cargv.data());
      ::_exit(127);
    }
    pids[i] = pid;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    bool waiting = false;
    for (size_t i = 0; i < hosts.size(); ++i) {
      if (pids[i] <= 0) continue;
      int status = 0;
      const pid_t done = ::waitpid(pids[i], &status, WNOHANG);
      if (done == pids[i] || (done < 0 && errno != EINTR)) {
        up[i] = done == pids[i] && WIFEXITED(status) && WEXITSTATUS(status) == 0;
        pids[i] = -1;
      } else {
        waiting = true;
      }
    }
    if (!waiting) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      for (pid_t& pid : pids) {
        if (pid <= 0) continue;
        ::kill(-pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        pid = -1;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return up;
}

}  // namespace trident::cli
