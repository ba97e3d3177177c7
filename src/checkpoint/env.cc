#include "checkpoint/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "checkpoint/status_macros.h"

namespace trident::checkpoint {
namespace {

Status posix_error(std::string_view what, const std::string& path, int err) {
  return Status::io_error(std::string(what) + " '" + path + "': " + std::strerror(err));
}

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status append(std::string_view data) override {
    if (fd_ < 0) return Status::io_error("append to closed file '" + path_ + "'");
    // write() may write less than asked (signals, the 2 GiB per-call limit): loop.
    const char* p = data.data();
    size_t left = data.size();
    while (left > 0) {
      ssize_t n = ::write(fd_, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        return posix_error("write to", path_, errno);
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
    return Status::ok();
  }

  // See Note [fsync, not fdatasync].
  Status sync() override {
    if (fd_ < 0) return Status::io_error("sync of closed file '" + path_ + "'");
    if (::fsync(fd_) != 0) return posix_error("fsync", path_, errno);
    return Status::ok();
  }

  Status close() override {
    if (fd_ < 0) return Status::ok();
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return posix_error("close", path_, errno);
    return Status::ok();
  }

 private:
  std::string path_;
  int fd_;
};

class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  ~PosixRandomAccessFile() override { ::close(fd_); }

  Status read(uint64_t offset, size_t n, void* dst) const override {
    char* p = static_cast<char*>(dst);
    uint64_t at = offset;
    size_t left = n;
    while (left > 0) {
      ssize_t got = ::pread(fd_, p, left, static_cast<off_t>(at));
      if (got < 0) {
        if (errno == EINTR) continue;
        return posix_error("read from", path_, errno);
      }
      if (got == 0) {
        return Status::io_error("read of bytes [" + std::to_string(offset) + ", " +
                                std::to_string(offset + n) + ") from '" + path_ +
                                "' ran past the end of the file at byte " + std::to_string(at));
      }
      p += got;
      at += static_cast<uint64_t>(got);
      left -= static_cast<size_t>(got);
    }
    return Status::ok();
  }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  int fd_;
  uint64_t size_;
};

// Note [fsync, not fdatasync]
// Why fsync? A checkpoint file is new, so its size (metadata) must be durable along with its
// data; fdatasync also flushes the size on Linux, so the saving would be the inode's times
// only, which is not worth a platform-dependent argument. On macOS fsync does not flush the
// drive's cache (F_FULLFSYNC does); trident targets Linux.
class PosixEnv final : public Env {
 public:
  StatusOr<std::unique_ptr<WritableFile>> new_writable_file(const std::string& path) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return posix_error("open for writing", path, errno);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
  }

  StatusOr<std::unique_ptr<RandomAccessFile>> new_random_access_file(
      const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return posix_error("open for reading", path, errno);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      int err = errno;
      ::close(fd);
      return posix_error("stat", path, err);
    }
    if (S_ISDIR(st.st_mode)) {
      ::close(fd);
      return Status::io_error("open for reading '" + path + "': is a directory");
    }
    return std::unique_ptr<RandomAccessFile>(
        new PosixRandomAccessFile(path, fd, static_cast<uint64_t>(st.st_size)));
  }

  StatusOr<uint64_t> file_size(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return posix_error("stat", path, errno);
    return static_cast<uint64_t>(st.st_size);
  }

  FileType file_type(const std::string& path) override {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) return FileType::kMissing;
    if (S_ISREG(st.st_mode)) return FileType::kFile;
    if (S_ISDIR(st.st_mode)) return FileType::kDirectory;
    if (S_ISLNK(st.st_mode)) return FileType::kSymlink;
    return FileType::kOther;
  }

  StatusOr<std::vector<std::string>> list_dir(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return posix_error("list directory", dir, errno);
    std::vector<std::string> names;
    errno = 0;
    while (struct dirent* e = ::readdir(d)) {
      std::string_view name = e->d_name;
      if (name != "." && name != "..") names.emplace_back(name);
    }
    int err = errno;
    ::closedir(d);
    if (err != 0) return posix_error("list directory", dir, err);
    std::sort(names.begin(), names.end());
    return names;
  }

  Status create_dir(const std::string& dir) override {
    if (::mkdir(dir.c_str(), 0755) != 0) return posix_error("create directory", dir, errno);
    return Status::ok();
  }

  Status remove_file(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return posix_error("remove file", path, errno);
    return Status::ok();
  }

  Status remove_dir(const std::string& dir) override {
    if (::rmdir(dir.c_str()) != 0) return posix_error("remove directory", dir, errno);
    return Status::ok();
  }

  Status rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return Status::io_error("rename '" + from + "' to '" + to + "': " + std::strerror(errno));
    }
    return Status::ok();
  }

  Status sync_dir(const std::string& dir) override {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return posix_error("open directory", dir, errno);
    int rc = ::fsync(fd);
    int err = errno;
    ::close(fd);
    if (rc != 0) return posix_error("fsync directory", dir, err);
    return Status::ok();
  }
};

}  // namespace

Env* default_env() {
  static PosixEnv* env = new PosixEnv;  // never destroyed: usable from static destructors
  return env;
}

std::string join_path(std::string_view a, std::string_view b) {
  if (a.empty()) return std::string(b);
  std::string out(a);
  if (out.back() != '/') out += '/';
  out += b;
  return out;
}

std::string parent_dir(std::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

std::string base_name(std::string_view path) {
  size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

StatusOr<std::string> read_file(Env* env, const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, env->new_random_access_file(path));
  std::string data(file->size(), '\0');
  CKPT_RETURN_IF_ERROR(file->read(0, data.size(), data.data()));
  return data;
}

Status create_dirs(Env* env, const std::string& dir) {
  const FileType type = env->file_type(dir);
  if (type == FileType::kDirectory || type == FileType::kSymlink) return Status::ok();
  if (type != FileType::kMissing) {
    return Status::io_error("create directory '" + dir + "': a file with that name exists");
  }
  const std::string parent = parent_dir(dir);
  if (parent != dir) CKPT_RETURN_IF_ERROR(create_dirs(env, parent));
  CKPT_RETURN_IF_ERROR(env->create_dir(dir));
  return env->sync_dir(parent);
}

Status remove_tree(Env* env, const std::string& path) {
  if (!is_directory(env, path)) return env->remove_file(path);
  CKPT_ASSIGN_OR_RETURN(std::vector<std::string> names, env->list_dir(path));
  for (const std::string& name : names)
    CKPT_RETURN_IF_ERROR(remove_tree(env, join_path(path, name)));
  return env->remove_dir(path);
}

}  // namespace trident::checkpoint
