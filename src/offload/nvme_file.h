// The NVMe tier's file (ZeRO-Infinity's swap files, DeepSpeed's AsyncIOBuilder): one scratch
// file per rank under parallel.nvme_path, preallocated, read and written in aligned extents with
// several requests in flight (io_uring through liburing), with O_DIRECT so that the host's page
// cache neither holds a second copy of what the tier exists to keep out of memory nor hides the
// disk's speed.
//
// The file is removed from its directory as soon as it is open: the tier lives only through
// this process's descriptor, so a crash, an OOM kill or MPI_Abort leaves no preallocated file
// behind on the disk (the name, with the host, process and a counter, is for messages).
//
// Requests progress while the owner calls into this object (write, read, poll, wait): up to
// queue_depth requests are with the kernel at once and complete on their own; the rest wait
// in a queue for the next call.
//
// Every extent written is checksummed (CRC-32C of the bytes handed to write()); reading it back
// checks the bytes against that checksum, so a bit flipped on the disk, a torn write or a
// foreign writer ends the run with the file and offset instead of training on garbage. An
// extent is read exactly as it was written (same offset and length): the tier is scratch that
// this process alone writes and reads.
//
// Note [Falling back]
// O_DIRECT needs a file system that supports it (tmpfs before Linux 6.6 and some network file
// systems do not): then the file is opened buffered, and open() says so in one line (on stderr).
// io_uring may be disabled (kernel.io_uring_disabled, seccomp in containers): then each request
// runs synchronously (pread/pwrite) when submitted, also said in one line. Both give the same
// bytes; only the speed differs.
//
// Note [Preallocation]
// The whole file is allocated when it is opened (posix_fallocate): a disk too small for the
// tier is an error before the first step, naming the path, the bytes wanted and the bytes free,
// and a write never meets a full disk mid-run. A write that fails anyway (an I/O error, a file
// system that cannot preallocate) is an error naming the file and offset.
//
// Not here: what the extents hold or when they move (the optimizer's tier: parallel/zero).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace trident::offload {

// Offsets, lengths and buffer addresses of O_DIRECT requests are multiples of this.
inline constexpr int64_t kNvmeAlignment = 4096;
// n rounded up to kNvmeAlignment.
inline constexpr int64_t nvme_aligned(int64_t n) { return (n + kNvmeAlignment - 1) / kNvmeAlignment * kNvmeAlignment; }

struct NvmeFileOptions {
  int queue_depth = 128;            // requests in flight (aio_thread_count x queue_depth in DeepSpeed)
  int64_t request_bytes = 1 << 20;  // a larger extent goes out as several requests of this size (<= 1 GiB)
  bool direct = true;               // O_DIRECT (Note [Falling back])
  bool io_uring = true;             // asynchronous requests (Note [Falling back])
};

// Host memory aligned for O_DIRECT, zero-filled.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(int64_t bytes);
  AlignedBuffer(AlignedBuffer&&) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&&) noexcept;
  ~AlignedBuffer();
  void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  int64_t bytes_ = 0;
};

class NvmeFile {
 public:
  using Ticket = int64_t;

  // Creates (a new file: an existing one is an error) and preallocates `bytes` bytes at `path`,
  // then removes the name; throws naming `what` (the config key the path came from), the path
  // and the cause.
  static std::unique_ptr<NvmeFile> create(const std::filesystem::path& path, int64_t bytes,
                                          const NvmeFileOptions& options, const std::string& what);
  // Waits for the requests in flight and closes the file.
  ~NvmeFile();
  NvmeFile(const NvmeFile&) = delete;
  NvmeFile& operator=(const NvmeFile&) = delete;

  // Starts writing `bytes` bytes from `src` at `offset` (both multiples of kNvmeAlignment, src
  // aligned as AlignedBuffer's; src must stay unchanged until the write is waited for).
  Ticket write(int64_t offset, const void* src, int64_t bytes);
  // Starts reading the extent written at `offset` (`bytes` long) into `dst`.
  Ticket read(int64_t offset, void* dst, int64_t bytes);
  // Waits for a request; throws naming the file and offset when it failed or, for a read, when
  // the bytes do not match the checksum of what was written there.
  void wait(Ticket ticket);
  void wait_all();
  // Submits queued requests and takes the completions there are, without waiting.
  void poll();
  // Whether a request has completed (wait() still reports its outcome).
  bool done(Ticket ticket) const;

  const std::filesystem::path& path() const { return path_; }  // as created; removed since
  int fd() const { return fd_; }  // the open file (tests reach it through /proc/self/fd)
  int64_t size() const { return size_; }
  bool direct() const { return direct_; }
  bool asynchronous() const { return ring_ != nullptr; }
  // Bytes of the reads and writes started so far (what this process asked of the disk, whether
  // or not it has completed yet).
  int64_t bytes_read() const { return bytes_read_; }
  int64_t bytes_written() const { return bytes_written_; }
  // Seconds the owner spent blocked waiting for requests (not hidden behind its own work).
  double wait_seconds() const { return wait_seconds_; }

 private:
  struct Ring;  // liburing's io_uring, kept out of this header
  struct Request {
    bool is_read;
    int64_t offset, bytes;
    char* buffer;
    int64_t parts_left = 0;  // requests of request_bytes not yet completed
    std::string error;       // the first failed part's
    uint32_t crc = 0;        // a write's: recorded for its extent once it has succeeded
  };
  struct Part {
    Ticket ticket;
    int64_t offset, bytes;
    char* buffer;
  };

  NvmeFile(std::filesystem::path path, int fd, int64_t size, bool direct, const NvmeFileOptions& options);
  Ticket start(bool is_read, int64_t offset, char* buffer, int64_t bytes);
  // Submits queued parts while the ring has room.
  void submit();
  // Waits for one completion (or, when `block` is false, takes one if there is one) and
  // accounts for it; returns whether it took one.
  bool reap_one(bool block = true);
  void complete_part(const Part& part, int64_t result);
  void finish(Ticket ticket, Request& r);

  const std::filesystem::path path_;
  const int fd_;
  const int64_t size_;
  const bool direct_;
  const NvmeFileOptions options_;
  std::unique_ptr<Ring> ring_;
  std::map<Ticket, Request> requests_;
  std::vector<Part> queued_;                // parts not yet submitted, in order
  std::map<uint64_t, Part> in_flight_;      // by user data
  uint64_t next_part_id_ = 0;
  Ticket next_ticket_ = 0;
  std::map<int64_t, std::pair<int64_t, uint32_t>> written_;  // offset -> (bytes, CRC-32C)
  int64_t bytes_read_ = 0, bytes_written_ = 0;
  double wait_seconds_ = 0.0;
};

}  // namespace trident::offload
