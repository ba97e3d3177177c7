// Token files: mmap'ed reading and atomic writing (see token_file.h).
#include "data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>

namespace trident::data {

static_assert(std::endian::native == std::endian::little,
              "token files are little-endian uint16 used in place: see Note [Little-endian only]");

namespace {

std::string errno_text() {
  return std::strerror(errno);
}

// Closes a file descriptor when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now, reporting the error (close can report a failed write-back).
  int close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

}  // namespace

TokenFile::TokenFile(const uint16_t* data, int64_t size, std::string name, void* mapping,
                     size_t mapping_bytes, std::vector<uint16_t> owned)
    : data_(data),
      size_(size),
      name_(std::move(name)),
      mapping_(mapping),
      mapping_bytes_(mapping_bytes),
      owned_(std::move(owned)) {
  if (!mapping_) data_ = owned_.data();
}

TokenFile::~TokenFile() {
  if (mapping_) ::munmap(mapping_, mapping_bytes_);
}

StatusOr<std::shared_ptr<const TokenFile>> TokenFile::open(const std::filesystem::path& path) {
  const std::string name = path.string();
  Fd fd(::open(name.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return Status::io_error("cannot open token file " + name + ": " + errno_text());
  struct stat st;
  if (::fstat(fd.get(), &st) != 0)
    return Status::io_error("cannot stat token file " + name + ": " + errno_text());
  if (!S_ISREG(st.st_mode))
    return Status::io_error("token file " + name + " is not a regular file");
  const size_t bytes = static_cast<size_t>(st.st_size);
  if (bytes == 0) return Status::invalid("token file " + name + " is empty");
  if (bytes % 2 != 0)
    return Status::invalid("token file " + name + " has an odd size (" + std::to_string(bytes) +
                           " bytes): it should hold 2-byte (uint16) token ids, so it is "
                           "truncated or not a token file");
  void* mapping = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (mapping == MAP_FAILED)
    return Status::io_error("cannot mmap token file " + name + ": " + errno_text());
  return std::shared_ptr<const TokenFile>(new TokenFile(static_cast<const uint16_t*>(mapping),
                                                        static_cast<int64_t>(bytes / 2), name,
                                                        mapping, bytes, {}));
}

std::shared_ptr<const TokenFile> TokenFile::from_tokens(std::vector<uint16_t> tokens,
                                                        std::string name) {
  const auto size = static_cast<int64_t>(tokens.size());
  return std::shared_ptr<const TokenFile>(
      new TokenFile(nullptr, size, std::move(name), nullptr, 0, std::move(tokens)));
}

Status TokenFile::check_vocab_size(int64_t vocab_size) const {
  for (int64_t i = 0; i < size_; ++i) {
    if (data_[i] >= vocab_size)
      return Status::invalid("token file " + name_ + " has id " + std::to_string(data_[i]) +
                             " at position " + std::to_string(i) + ", outside the vocabulary of " +
                             std::to_string(vocab_size) +
                             " tokens: was it prepared with another tokenizer?");
  }
  return Status::ok();
}

Status write_token_file(const std::filesystem::path& path, std::span<const uint16_t> tokens) {
  const std::string name = path.string();
  if (tokens.empty())
    return Status::invalid("refusing to write an empty token file " + name +
                           " (it could not be opened again)");
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  const std::string tmp = name + ".tmp." + std::to_string(::getpid());
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return Status::io_error("cannot create " + tmp + ": " + errno_text());
  // Reports errno for the failed step and removes the temporary file.
  auto fail = [&](const std::string& what) {
    Status s = Status::io_error("cannot " + what + " (writing " + name + "): " + errno_text());
    ::unlink(tmp.c_str());
    return s;
  };
  const char* p = reinterpret_cast<const char*>(tokens.data());
  size_t left = tokens.size_bytes();
  while (left > 0) {
    const ssize_t n = ::write(fd.get(), p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("write " + tmp);
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) return fail("fsync " + tmp);
  if (fd.close() != 0) return fail("close " + tmp);
  if (::rename(tmp.c_str(), name.c_str()) != 0) return fail("rename " + tmp + " to " + name);
  // Make the rename itself durable.
  Fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() < 0 || ::fsync(dir_fd.get()) != 0)
    return Status::io_error("wrote " + name + " but cannot fsync its directory " + dir.string() +
                            ": " + errno_text());
  return Status::ok();
}

}  // namespace trident::data
