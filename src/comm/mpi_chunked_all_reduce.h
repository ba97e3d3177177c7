// A large all-reduce on one host as a queue of cache-sized MPI_Iallreduce chunks, one in flight
// at a time per communicator.
//
// Note [Chunked all-reduce on one host]
// OpenMPI 4's MPI_Iallreduce between two ranks of one host measured (fastest of 5, Zen 4):
//   26 MB in 21 ms, 51 MB in 75 ms, 132 MB in 183 ms: past the cache, about 3x per byte;
//   MPI_Allreduce: 35 and 82 ms for 51 and 132 MB;
//   the same 51 and 132 MB as 1 MB Iallreduces one after another: 21 and 46 ms.
// Data parallelism's 51 MB buckets (a LLaMA embedding and head of 50257 x 256) and tensor
// parallelism's larger activations paid the slow path. So an all-reduce past 2 kChunkBytes
// becomes a queue of chunks of kChunkBytes, each posted when the one before it has completed
// (2 MiB: bench/all_reduce_bench gave 20 and 54 ms for 51 and 132 MB, against MPI_Allreduce's
// 25 and 68 and one Iallreduce's 60 and 142; 1 MiB chunks 26 and 69, 4 MiB 22 and 54, and
// below 4 MiB one Iallreduce is as fast). Posting them all at once was as slow as one (71 ms
// for 51 MB: they progress together).
//
// MPI requires a communicator's collectives to start in the same order on every rank, and a
// chunk starts when some poll finds the one before it done, which is at a different moment on
// each rank. So the queue is per MPI communicator (shared by every object on the same handle)
// and strictly in order, and every other collective started on the communicator first
// completes what is queued (flush). The ranks then start chunks, and whatever follows them, in
// the same order. And since MPI lets a rank wait on something else (a receive, another
// communicator's collective) while its partner waits on the all-reduce, every wait and test of
// the MPI backend advances every queue (advance_all): a queue is never stuck behind a rank
// that polls something else.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "comm/communicator.h"

namespace trident::comm {

class ChunkedAllReduces : public std::enable_shared_from_this<ChunkedAllReduces> {
 public:
  static constexpr int64_t kChunkBytes = int64_t{1} << 21;

  // The queue of the communicator `comm` (one per handle while any user holds it).
  static std::shared_ptr<ChunkedAllReduces> for_comm(MPI_Comm comm);
  // Advances every live queue: from every wait and test of the MPI backend.
  static void advance_all();

  explicit ChunkedAllReduces(MPI_Comm comm) : comm_(comm) {}
  ~ChunkedAllReduces();
  ChunkedAllReduces(const ChunkedAllReduces&) = delete;
  ChunkedAllReduces& operator=(const ChunkedAllReduces&) = delete;

  // Queues an in-place all-reduce of `count` elements of `type` at `data` in chunks; waiting
  // past the communication timeout names `what` and ends the job. `on_complete` runs once its
  // last chunk has completed (the flight record's completion).
  std::unique_ptr<Work> start(char* data, int64_t count, MPI_Datatype type, int64_t element_bytes, MPI_Op op,
                              std::string what, std::function<void()> on_complete);
  // Completes every queued chunk: before any other collective starts on the communicator.
  void flush();

 private:
  struct Job;
  class ChunkWork;
  enum class Progress { kIdle, kPending, kChunkDone };
  // Tests the chunk in flight and, once it is done, starts the next; with none in flight,
  // starts the first queued (kIdle: nothing queued).
  Progress advance();
  void post_next();

  MPI_Comm comm_;
  std::deque<std::shared_ptr<Job>> jobs_;  // in the order they were started, the first in flight
  MPI_Request current_ = MPI_REQUEST_NULL;
  int64_t in_flight_ = 0;  // elements of the front job's chunk in flight
};

}  // namespace trident::comm
