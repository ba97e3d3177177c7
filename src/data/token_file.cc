// Token files: mmap'ed reading and atomic writing (see token_file.h).
#include "data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

namespace trident::data {

static_assert(std::endian::native == std::endian::little,
              "token files are little-endian ids used in place: see Note [Little-endian only]");

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

TokenFile::TokenFile(const void* data, bool wide, int64_t size, std::string name, void* mapping,
                     size_t mapping_bytes, std::vector<uint16_t> owned, std::vector<uint32_t> owned32)
    : wide_(wide),
      size_(size),
      name_(std::move(name)),
      mapping_(mapping),
      mapping_bytes_(mapping_bytes),
      owned_(std::move(owned)),
      owned32_(std::move(owned32)) {
  if (!mapping_) data = wide_ ? static_cast<const void*>(owned32_.data()) : static_cast<const void*>(owned_.data());
  if (wide_) data32_ = static_cast<const uint32_t*>(data);
  else data_ = static_cast<const uint16_t*>(data);
}

std::span<const uint16_t> TokenFile::tokens() const {
  TRI_CHECK(!wide_, "token file ", name_, " holds uint32 ids: use TokenFile::read");
  return {data_, static_cast<size_t>(size_)};
}

void TokenFile::read(int64_t start, int64_t n, int64_t* out) const {
  TRI_CHECK(start >= 0 && n >= 0 && start + n <= size_, "token file ", name_, ": ids [", start, ", ", start + n,
            ") out of its ", size_);
  for (int64_t i = 0; i < n; ++i) out[i] = id(start + i);
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
  // Note [uint32 token files]: the header, if the file starts with it.
  char header[kTokenFile32Header];
  if (bytes >= kTokenFile32Header && ::pread(fd.get(), header, sizeof header, 0) == static_cast<ssize_t>(sizeof header) &&
      std::memcmp(header, kTokenFile32Magic, sizeof kTokenFile32Magic) == 0) {
    uint64_t count = 0;
    std::memcpy(&count, header + 8, sizeof count);
    if (count == 0 || (bytes - kTokenFile32Header) / 4 != count || (bytes - kTokenFile32Header) % 4 != 0)
      return Status::invalid("token file " + name + " starts with the uint32 header (TRITOK32) for " +
                             std::to_string(count) + " ids but holds " + std::to_string(bytes) +
                             " bytes (16 + 4 per id expected): it is truncated or not a uint32 token file");
    void* mapping = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (mapping == MAP_FAILED) return Status::io_error("cannot mmap token file " + name + ": " + errno_text());
    return std::shared_ptr<const TokenFile>(new TokenFile(static_cast<const char*>(mapping) + kTokenFile32Header, true,
                                                          static_cast<int64_t>(count), name, mapping, bytes, {}, {}));
  }
  if (bytes % 2 != 0)
    return Status::invalid("token file " + name + " has an odd size (" + std::to_string(bytes) +
                           " bytes): it should hold 2-byte (uint16) token ids, so it is "
                           "truncated or not a token file");
  void* mapping = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (mapping == MAP_FAILED)
    return Status::io_error("cannot mmap token file " + name + ": " + errno_text());
  auto file = std::shared_ptr<const TokenFile>(new TokenFile(mapping, false, static_cast<int64_t>(bytes / 2), name,
                                                             mapping, bytes, {}, {}));
  if (Status s = file->check_not_headerless_uint32(); !s.is_ok()) return s;
  return file;
}

std::shared_ptr<const TokenFile> TokenFile::from_tokens(std::vector<uint16_t> tokens,
                                                        std::string name) {
  const auto size = static_cast<int64_t>(tokens.size());
  return std::shared_ptr<const TokenFile>(
      new TokenFile(nullptr, false, size, std::move(name), nullptr, 0, std::move(tokens), {}));
}

std::shared_ptr<const TokenFile> TokenFile::from_tokens32(std::vector<uint32_t> tokens, std::string name) {
  const auto size = static_cast<int64_t>(tokens.size());
  return std::shared_ptr<const TokenFile>(
      new TokenFile(nullptr, true, size, std::move(name), nullptr, 0, {}, std::move(tokens)));
}

// Note [Headerless uint32 files]
// uint32 ids written without trident's header (by another tool) read as uint16 pairs whose
// second half is 0 when the ids are below 65,536: every other id 0, and a run that trains
// on them without complaint. In real text no tokenizer produces id 0 at every odd position,
// so a file whose first kProbe odd positions are all 0 (and not all of its even ones) is refused.
Status TokenFile::check_not_headerless_uint32() const {
  constexpr int64_t kProbe = 512;
  if (wide_ || size_ < 2 * kProbe) return Status::ok();
  bool any_even = false;
  for (int64_t i = 0; i < 2 * kProbe; i += 2) {
    if (id(i + 1) != 0) return Status::ok();
    any_even = any_even || id(i) != 0;
  }
  if (!any_even) return Status::ok();
  return Status::invalid("token file " + name_ + " looks like uint32 ids without trident's header: every second " +
                         "uint16 of its first " + std::to_string(2 * kProbe) +
                         " is 0 (the high halves of little-endian uint32 ids). trident reads uint16 files as " +
                         "nanoGPT writes them, and uint32 files that start with the TRITOK32 header: write it with " +
                         "trident prepare, or as uint16 if every id is below 65,536");
}

Status TokenFile::check_vocab_size(int64_t vocab_size) const {
  for (int64_t i = 0; i < size_; ++i) {
    if (id(i) >= vocab_size)
      return Status::invalid("token file " + name_ + " has id " + std::to_string(id(i)) +
                             " at position " + std::to_string(i) + ", outside the vocabulary of " +
                             std::to_string(vocab_size) +
                             " tokens: was it prepared with another tokenizer?");
  }
  return Status::ok();
}

// Writes header + data to `path` atomically (write_token_file's contract).
Status write_atomically(const std::filesystem::path& path, std::string_view header, const char* data, size_t bytes,
                        bool empty) {
  const std::string name = path.string();
  if (empty)
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
  for (const auto& [p0, len] : {std::pair<const char*, size_t>{header.data(), header.size()}, {data, bytes}}) {
    const char* p = p0;
    size_t left = len;
    while (left > 0) {
      const ssize_t n = ::write(fd.get(), p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return fail("write " + tmp);
      p += n;
      left -= static_cast<size_t>(n);
    }
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

Status write_token_file(const std::filesystem::path& path, std::span<const uint16_t> tokens) {
  return write_atomically(path, {}, reinterpret_cast<const char*>(tokens.data()), tokens.size_bytes(), tokens.empty());
}

Status write_token_file32(const std::filesystem::path& path, std::span<const uint32_t> tokens) {
  char header[kTokenFile32Header];
  std::memcpy(header, kTokenFile32Magic, sizeof kTokenFile32Magic);
  const uint64_t count = tokens.size();
  std::memcpy(header + 8, &count, sizeof count);
  return write_atomically(path, std::string_view(header, sizeof header), reinterpret_cast<const char*>(tokens.data()),
                          tokens.size_bytes(), tokens.empty());
}

}  // namespace trident::data
