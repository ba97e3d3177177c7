// The out_dir lock (see run_lock.h).
#include "train/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <utility>

namespace trident::train {

// Note [The out_dir lock]
// Q: Why flock on a file of its own, and not a pid file or the presence of a marker?
// A: A marker outlives a crashed run (kill -9, a node lost) and then refuses every restart
// until a person deletes it. A flock belongs to the open file and the kernel drops it when the
// process ends, however it ends: a crashed run leaves a .lock file with a stale record, which
// nobody reads because the flock is free. The file is never removed (removing a lock file
// while another process waits on it lets two runs lock two different files).
// Q: Which ranks take it?
// A: Rank 0, the rank that writes metrics.jsonl and creates the directory; the others learn
// the outcome from one all-reduce (Trainer::run), so every rank of a refused run stops before
// writing. flock is advisory and, on NFS, emulated by Linux with byte-range locks (since
// 2.6.12) that the server arbitrates: two jobs whose rank 0s are on different hosts still
// exclude each other there. A filesystem without lock support fails the flock (ENOLCK,
// EOPNOTSUPP): an error with the errno, not a silently unlocked run.
// Q: The same process twice?
// A: flock locks are per open file description, so a second open in the same process would be
// refused too. Tests run several Trainers on one out_dir in one process, one after the other
// and (ranks as threads) side by side; so a process shares its one locked file among its
// RunLocks, found by the file's device and inode.
struct RunLock::Held {
  std::string path;
  int fd = -1;
  dev_t dev = 0;
  ino_t ino = 0;
  ~Held();
};

namespace {

std::mutex& held_mutex() {
  static std::mutex m;
  return m;
}

// This process's locked files, by (device, inode).
std::map<std::pair<dev_t, ino_t>, std::weak_ptr<RunLock::Held>>& held_files() {
  static std::map<std::pair<dev_t, ino_t>, std::weak_ptr<RunLock::Held>> files;
  return files;
}

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

std::string read_record(int fd) {
  std::string text;
  char buf[512];
  for (off_t at = 0; text.size() < 4096;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    at += n;
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text;
}

std::string this_process_record() {
  char host[256] = "unknown";
  ::gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return "pid " + std::to_string(::getpid()) + " on host " + host + ", started " + when + "\n";
}

}  // namespace

RunLock::Held::~Held() {
  if (fd < 0) return;
  ::close(fd);  // releases the flock; then the entry, unless a new holder replaced it meanwhile
  std::lock_guard<std::mutex> g(held_mutex());
  auto it = held_files().find({dev, ino});
  if (it != held_files().end() && it->second.expired()) held_files().erase(it);
}

StatusOr<RunLock> RunLock::acquire(const std::string& dir) {
  const std::string path = dir + "/.lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Status::io_error(errno_text("cannot open the out_dir lock file '" + path + "'"));
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    const Status s = Status::io_error(errno_text("cannot stat the out_dir lock file '" + path + "'"));
    ::close(fd);
    return s;
  }
  std::lock_guard<std::mutex> g(held_mutex());
  if (auto it = held_files().find({st.st_dev, st.st_ino}); it != held_files().end()) {
    if (std::shared_ptr<Held> held = it->second.lock()) {  // this process holds it already
      ::close(fd);
      return RunLock(std::move(held));
    }
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    Status s = Status::io_error(errno_text("cannot lock the out_dir lock file '" + path + "'"));
    if (err == EWOULDBLOCK) {
      const std::string holder = read_record(fd);
      s = Status::invalid("train.out_dir '" + dir + "' is in use by another run (" +
                          (holder.empty() ? "its record in " + path + " is empty" : holder) +
                          "): two runs in one directory would mix their metrics and checkpoints. Wait for it to "
                          "end, stop it (SIGTERM writes a checkpoint), or choose another train.out_dir. The lock is "
                          "an flock on " + path + ": it ends with its process, so nothing needs deleting after a crash");
    }
    ::close(fd);
    return s;
  }
  // Ours: the record says who (a failure to write it leaves the lock held, only unnamed).
  const std::string record = this_process_record();
  if (::ftruncate(fd, 0) == 0) {
    [[maybe_unused]] const ssize_t n = ::pwrite(fd, record.data(), record.size(), 0);
  }
  auto held = std::make_shared<Held>();
  held->path = path;
  held->fd = fd;
  held->dev = st.st_dev;
  held->ino = st.st_ino;
  held_files()[{st.st_dev, st.st_ino}] = held;
  return RunLock(std::move(held));
}

RunLock::~RunLock() = default;

const std::string& RunLock::path() const { return held_->path; }

}  // namespace trident::train
