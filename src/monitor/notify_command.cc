#include "monitor/notify_command.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

extern char** environ;

namespace trident::monitor {

Status run_notify_command(const std::string& command, const std::string& input, double timeout_s,
                          const std::atomic<bool>* abort) {
  const std::string what = "notify command '" + command + "'";
  std::string path = (std::filesystem::temp_directory_path() / "trident-event-XXXXXX").string();
  const int fd = mkstemp(path.data());
  if (fd < 0) return Status::io_error(what + ": cannot create a temporary file for its input: " + std::strerror(errno));
  const bool wrote = ::write(fd, input.data(), input.size()) == static_cast<ssize_t>(input.size());
  ::close(fd);
  if (!wrote) {
    std::remove(path.c_str());
    return Status::io_error(what + ": cannot write its input to " + path);
  }
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, path.c_str(), O_RDONLY, 0);
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);  // its own group: a timeout kills all of it
  posix_spawnattr_setpgroup(&attr, 0);
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/bin/sh", &actions, &attr, const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  std::remove(path.c_str());  // the child holds it open
  if (rc != 0) return Status::io_error(what + ": cannot start /bin/sh: " + std::strerror(rc));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0) return Status::io_error(what + ": waitpid: " + std::strerror(errno));
    const bool aborted = abort != nullptr && abort->load();
    if (aborted || std::chrono::steady_clock::now() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      if (aborted) return Status::io_error(what + ": killed (the run is ending)");
      return Status::io_error(what + ": still running after " + std::to_string(timeout_s) + " s; killed");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::ok();
  if (WIFEXITED(status)) return Status::io_error(what + ": exited with status " + std::to_string(WEXITSTATUS(status)));
  return Status::io_error(what + ": ended by signal " + std::to_string(WTERMSIG(status)));
}

}  // namespace trident::monitor
