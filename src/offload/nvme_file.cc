#include "offload/nvme_file.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "core/crc32c.h"
#include "core/check.h"

namespace trident::offload {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

std::string hex(uint32_t v) {
  char s[9];
  std::snprintf(s, sizeof s, "%08x", v);
  return s;
}

int64_t free_bytes(const std::filesystem::path& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
}

}  // namespace

AlignedBuffer::AlignedBuffer(int64_t bytes) : bytes_(nvme_aligned(bytes)) {
  if (bytes_ == 0) return;
  TRI_CHECK(::posix_memalign(&data_, static_cast<size_t>(kNvmeAlignment), static_cast<size_t>(bytes_)) == 0,
            "the NVMe tier: could not allocate an aligned host buffer of ", bytes_, " bytes");
  std::memset(data_, 0, static_cast<size_t>(bytes_));
}
AlignedBuffer::AlignedBuffer(AlignedBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& o) noexcept {
  if (this != &o) {
    std::free(data_);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}
AlignedBuffer::~AlignedBuffer() { std::free(data_); }

struct NvmeFile::Ring {
  io_uring ring{};
};

std::unique_ptr<NvmeFile> NvmeFile::create(const std::filesystem::path& path, int64_t bytes,
                                           const NvmeFileOptions& options, const std::string& what) {
  TRI_CHECK(bytes >= 0 && bytes % kNvmeAlignment == 0, "the NVMe tier: a file of ", bytes,
            " bytes (a multiple of ", kNvmeAlignment, " is needed)");
  TRI_CHECK(options.queue_depth >= 1 && options.queue_depth <= 4096, what, ": a queue depth of ",
            options.queue_depth, " requests (1-4096 allowed)");
  TRI_CHECK(options.request_bytes >= kNvmeAlignment && options.request_bytes <= (int64_t{1} << 30) &&
                options.request_bytes % kNvmeAlignment == 0,
            what, ": requests of ", options.request_bytes, " bytes (a multiple of ", kNvmeAlignment,
            " up to 1 GiB needed)");
  const std::filesystem::path dir = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
  std::error_code ec;
  TRI_CHECK(std::filesystem::is_directory(dir, ec), what, " = '", dir.string(),
            "' is not a directory: the NVMe tier's files go there (create it, on the fast disk)");
  const int flags = O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC;
  bool direct = options.direct;
  int fd = ::open(path.c_str(), flags | (direct ? O_DIRECT : 0), 0600);
  if (fd < 0 && direct && errno == EINVAL) {
    direct = false;
    fd = ::open(path.c_str(), flags, 0600);
    if (fd >= 0)
      std::fprintf(stderr, "trident: %s: '%s' does not support O_DIRECT; the NVMe tier reads and writes through "
                   "the page cache\n", what.c_str(), dir.c_str());
  }
  TRI_CHECK(fd >= 0, what, ": cannot create the NVMe tier's file '", path.string(), "': ", errno_text(errno));
  ::unlink(path.c_str());  // scratch: nothing outlives the process (see the header)
  if (bytes > 0) {
    const int err = ::posix_fallocate(fd, 0, bytes);
    if (err != 0) {
      ::close(fd);
      const int64_t avail = free_bytes(dir);
      TRI_CHECK(false, what, ": cannot allocate ", bytes, " bytes for the NVMe tier's file '", path.string(), "' (",
                errno_text(err), "); the file system has ", avail, " bytes free",
                err == ENOSPC ? ": free space or point the key at a larger disk" : "");
    }
  }
  return std::unique_ptr<NvmeFile>(new NvmeFile(path, fd, bytes, direct, options));
}

NvmeFile::NvmeFile(std::filesystem::path path, int fd, int64_t size, bool direct, const NvmeFileOptions& options)
    : path_(std::move(path)), fd_(fd), size_(size), direct_(direct), options_(options) {
  if (!options.io_uring) return;
  auto ring = std::make_unique<Ring>();
  const int err = io_uring_queue_init(static_cast<unsigned>(options.queue_depth), &ring->ring, 0);
  if (err == 0) {
    ring_ = std::move(ring);
  } else {
    std::fprintf(stderr, "trident: io_uring is not available here (%s); the NVMe tier's requests run one at a "
                 "time\n", errno_text(-err).c_str());
  }
}

NvmeFile::~NvmeFile() {
  try {
    while (!in_flight_.empty()) reap_one();
  } catch (...) {  // destructors must not throw; the file is going away
  }
  if (ring_) io_uring_queue_exit(&ring_->ring);
  ::close(fd_);
}

NvmeFile::Ticket NvmeFile::write(int64_t offset, const void* src, int64_t bytes) {
  const uint32_t crc = core::crc32c(src, static_cast<size_t>(bytes));
  const Ticket t = start(false, offset, static_cast<char*>(const_cast<void*>(src)), bytes);
  requests_.at(t).crc = crc;
  if (ring_) poll();
  return t;
}

NvmeFile::Ticket NvmeFile::read(int64_t offset, void* dst, int64_t bytes) {
  const auto it = written_.find(offset);
  TRI_CHECK(it != written_.end() && it->second.first == bytes, "the NVMe tier's file '", path_.string(),
            "': reading ", bytes, " bytes at offset ", offset, ", an extent that was never written");
  const Ticket t = start(true, offset, static_cast<char*>(dst), bytes);
  if (ring_) poll();
  return t;
}

NvmeFile::Ticket NvmeFile::start(bool is_read, int64_t offset, char* buffer, int64_t bytes) {
  TRI_CHECK(offset >= 0 && bytes >= 0 && offset + bytes <= size_ && offset % kNvmeAlignment == 0 &&
                bytes % kNvmeAlignment == 0 && reinterpret_cast<uintptr_t>(buffer) % kNvmeAlignment == 0,
            "the NVMe tier's file '", path_.string(), "': ", is_read ? "reading " : "writing ", bytes,
            " bytes at offset ", offset, " of ", size_, " (aligned to ", kNvmeAlignment, " bytes needed)");
  const Ticket t = next_ticket_++;
  Request& r = requests_[t];
  r = Request{is_read, offset, bytes, buffer, 0, {}, 0};
  (is_read ? bytes_read_ : bytes_written_) += bytes;
  if (!ring_) {  // synchronously (Note [Falling back])
    for (int64_t done = 0; done < bytes;) {
      const ssize_t n = is_read ? ::pread(fd_, buffer + done, static_cast<size_t>(bytes - done), offset + done)
                                : ::pwrite(fd_, buffer + done, static_cast<size_t>(bytes - done), offset + done);
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        r.error = n < 0 ? errno_text(errno) : "unexpected end of file";
        r.error += " at offset " + std::to_string(offset + done);
        break;
      }
      done += n;
    }
    return t;
  }
  for (int64_t at = 0; at < bytes; at += options_.request_bytes) {
    queued_.push_back({t, offset + at, std::min(options_.request_bytes, bytes - at), buffer + at});
    ++r.parts_left;
  }
  return t;
}

void NvmeFile::submit() {
  size_t taken = 0;
  while (taken < queued_.size() && in_flight_.size() < static_cast<size_t>(options_.queue_depth)) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_->ring);
    if (sqe == nullptr) break;
    const Part& p = queued_[taken++];
    if (requests_.at(p.ticket).is_read)
      io_uring_prep_read(sqe, fd_, p.buffer, static_cast<unsigned>(p.bytes), static_cast<uint64_t>(p.offset));
    else
      io_uring_prep_write(sqe, fd_, p.buffer, static_cast<unsigned>(p.bytes), static_cast<uint64_t>(p.offset));
    const uint64_t id = next_part_id_++;
    io_uring_sqe_set_data64(sqe, id);
    in_flight_.emplace(id, p);
  }
  queued_.erase(queued_.begin(), queued_.begin() + static_cast<std::ptrdiff_t>(taken));
  if (taken > 0) {
    // A busy ring keeps what it did not take in its submission queue: the next submit (here, or
    // before reap_one waits) hands it over.
    const int err = io_uring_submit(&ring_->ring);
    TRI_CHECK(err >= 0 || err == -EAGAIN || err == -EBUSY || err == -EINTR, "the NVMe tier's file '", path_.string(),
              "': submitting requests failed: ", errno_text(-err));
  }
}

void NvmeFile::poll() {
  if (!ring_) return;
  submit();
  while (reap_one(false)) submit();
}

bool NvmeFile::done(Ticket ticket) const {
  const auto it = requests_.find(ticket);
  return it == requests_.end() || it->second.parts_left == 0;
}

bool NvmeFile::reap_one(bool block) {
  io_uring_cqe* cqe = nullptr;
  int err;
  if (!block) {
    err = io_uring_peek_cqe(&ring_->ring, &cqe);
    if (err == -EAGAIN) return false;
  } else {
    do {
      err = io_uring_submit_and_wait(&ring_->ring, 1);  // what a busy ring left in the queue too
      if (err >= 0) err = io_uring_wait_cqe(&ring_->ring, &cqe);
    } while (err == -EINTR || err == -EAGAIN || err == -EBUSY);
  }
  TRI_CHECK(err == 0, "the NVMe tier's file '", path_.string(), "': waiting for a request failed: ", errno_text(-err));
  const uint64_t id = io_uring_cqe_get_data64(cqe);
  const int64_t result = cqe->res;
  io_uring_cqe_seen(&ring_->ring, cqe);
  const auto it = in_flight_.find(id);
  TRI_CHECK(it != in_flight_.end(), "the NVMe tier's file '", path_.string(), "': a completion for no request");
  const Part part = it->second;
  in_flight_.erase(it);
  complete_part(part, result);
  return true;
}

void NvmeFile::complete_part(const Part& part, int64_t result) {
  Request& r = requests_.at(part.ticket);
  if (result > 0 && result < part.bytes) {  // a short transfer: the rest goes out again
    queued_.insert(queued_.begin(), {part.ticket, part.offset + result, part.bytes - result, part.buffer + result});
    return;
  }
  if (result <= 0 && r.error.empty())
    r.error = (result < 0 ? errno_text(static_cast<int>(-result)) : std::string("unexpected end of file")) +
              " at offset " + std::to_string(part.offset);
  --r.parts_left;
}

void NvmeFile::wait(Ticket ticket) {
  const auto it = requests_.find(ticket);
  TRI_CHECK(it != requests_.end(), "the NVMe tier's file '", path_.string(), "': waiting for request ", ticket,
            ", which is not in flight");
  if (it->second.parts_left > 0) {
    const auto start = std::chrono::steady_clock::now();
    while (it->second.parts_left > 0) {
      submit();
      reap_one();
    }
    wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  Request r = std::move(it->second);
  requests_.erase(it);
  finish(ticket, r);
}

void NvmeFile::finish(Ticket, Request& r) {
  if (!r.is_read) {  // the extent's checksum is the last write's that succeeded; none after a failure
    if (r.error.empty()) written_[r.offset] = {r.bytes, r.crc};
    else written_.erase(r.offset);
  }
  TRI_CHECK(r.error.empty(), "the NVMe tier's file '", path_.string(), "': ", r.is_read ? "reading " : "writing ",
            r.bytes, " bytes at offset ", r.offset, " failed: ", r.error);
  if (!r.is_read) return;
  const auto& [bytes, want] = written_.at(r.offset);
  const uint32_t got = core::crc32c(r.buffer, static_cast<size_t>(r.bytes));
  TRI_CHECK(got == want, "the NVMe tier's file '", path_.string(), "': the ", bytes, " bytes at offset ", r.offset,
            " are not what was written there (CRC-32C ", hex(got), ", written ", hex(want),
            "): the disk or another writer changed them");
}

void NvmeFile::wait_all() {
  while (!requests_.empty()) wait(requests_.begin()->first);
}

}  // namespace trident::offload
