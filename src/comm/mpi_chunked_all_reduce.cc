#include "comm/mpi_chunked_all_reduce.h"

#include <algorithm>
#include <utility>

#include "comm/mpi_support.h"
#include "core/check.h"

namespace trident::comm {

struct ChunkedAllReduces::Job {
  char* data;
  int64_t count;
  MPI_Datatype type;
  int64_t element_bytes;
  MPI_Op op;
  std::string what;
  std::function<void()> on_complete;
  int64_t posted = 0;     // elements whose chunk has started
  int64_t completed = 0;  // elements whose chunk has completed
  bool done = false;
};

class ChunkedAllReduces::ChunkWork final : public Work {
 public:
  ChunkWork(ChunkedAllReduces& owner, std::shared_ptr<Job> job) : owner_(owner), job_(std::move(job)) {}
  ~ChunkWork() override {
    try {
      wait();
    } catch (...) {  // a destructor must not throw; the failure was the caller's to wait for
    }
  }
  void wait() override {
    // A fresh spin budget per chunk (poll_until_done sleeps between polls after 1000): a chunk
    // takes several tests to complete, and sleeping through 132 of them had 132 MB take 349 ms.
    while (!job_->done)
      mpi_support::poll_until_done([this] { return owner_.advance() != Progress::kPending || job_->done; }, job_->what,
                                   [] { return std::string(); });
  }
  bool test() override {
    owner_.advance();
    return job_->done;
  }

 private:
  ChunkedAllReduces& owner_;
  std::shared_ptr<Job> job_;
};

ChunkedAllReduces::~ChunkedAllReduces() {
  try {
    flush();
  } catch (...) {
  }
}

std::unique_ptr<Work> ChunkedAllReduces::start(char* data, int64_t count, MPI_Datatype type, int64_t element_bytes,
                                               MPI_Op op, std::string what, std::function<void()> on_complete) {
  auto job = std::make_shared<Job>(Job{data, count, type, element_bytes, op, std::move(what), std::move(on_complete)});
  jobs_.push_back(job);
  advance();  // the first chunk starts now when nothing is ahead of it
  return std::make_unique<ChunkWork>(*this, std::move(job));
}

void ChunkedAllReduces::flush() {
  while (!jobs_.empty())
    mpi_support::poll_until_done([this] { return advance() != Progress::kPending; },
                                 jobs_.front()->what + " (chunks queued before another collective)",
                                 [] { return std::string(); });
}

ChunkedAllReduces::Progress ChunkedAllReduces::advance() {
  if (current_ != MPI_REQUEST_NULL) {
    int done = 0;
    const int rc = MPI_Test(&current_, &done, MPI_STATUS_IGNORE);
    TRI_CHECK_KIND(ErrorKind::kDistributed, rc == MPI_SUCCESS, jobs_.front()->what, " failed: ", mpi_support::mpi_error(rc));
    if (!done) return Progress::kPending;
    const std::shared_ptr<Job> front = jobs_.front();
    front->completed += in_flight_;
    in_flight_ = 0;
    if (front->completed == front->count) {
      jobs_.pop_front();
      front->done = true;
      if (front->on_complete) front->on_complete();
    }
    if (!jobs_.empty()) post_next();
    return Progress::kChunkDone;
  }
  if (jobs_.empty()) return Progress::kIdle;
  post_next();
  return Progress::kPending;
}

void ChunkedAllReduces::post_next() {
  Job& job = *jobs_.front();
  const int64_t chunk = std::max<int64_t>(1, kChunkBytes / job.element_bytes);
  const int64_t n = std::min(chunk, job.count - job.posted);
  const int rc = MPI_Iallreduce(MPI_IN_PLACE, job.data + job.posted * job.element_bytes, static_cast<int>(n), job.type,
                                job.op, comm_, &current_);
  TRI_CHECK_KIND(ErrorKind::kDistributed, rc == MPI_SUCCESS, job.what, " failed to start a chunk: ",
                 mpi_support::mpi_error(rc));
  job.posted += n;
  in_flight_ = n;
}

}  // namespace trident::comm
