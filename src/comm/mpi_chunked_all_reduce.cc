#include "comm/mpi_chunked_all_reduce.h"

#include <algorithm>
#include <exception>
#include <utility>
#include <vector>

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

namespace {
// Every queue some communicator holds, by handle (the main thread's: MPI_THREAD_FUNNELED).
std::vector<std::pair<MPI_Comm, std::weak_ptr<ChunkedAllReduces>>>& queues() {
  static std::vector<std::pair<MPI_Comm, std::weak_ptr<ChunkedAllReduces>>> all;
  return all;
}
}  // namespace

std::shared_ptr<ChunkedAllReduces> ChunkedAllReduces::for_comm(MPI_Comm comm) {
  auto& all = queues();
  std::erase_if(all, [](const auto& q) { return q.second.expired(); });
  for (const auto& [handle, queue] : all)
    if (handle == comm) return queue.lock();
  auto made = std::make_shared<ChunkedAllReduces>(comm);
  all.emplace_back(comm, made);
  return made;
}

void ChunkedAllReduces::advance_all() {
  for (const auto& entry : std::vector(queues()))  // advancing may end a Work and drop a queue
    if (const std::shared_ptr<ChunkedAllReduces> q = entry.second.lock(); q && !q->jobs_.empty()) q->advance();
}

class ChunkedAllReduces::ChunkWork final : public Work {
 public:
  ChunkWork(std::shared_ptr<ChunkedAllReduces> owner, std::shared_ptr<Job> job)
      : owner_(std::move(owner)), job_(std::move(job)) {}
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
      mpi_support::poll_until_done([this] { return job_->done || owner_->advance() != Progress::kPending; }, job_->what,
                                   [] { return std::string(); });
  }
  bool test() override {
    if (job_->done) return true;
    advance_all();
    return job_->done;
  }

 private:
  std::shared_ptr<ChunkedAllReduces> owner_;  // outlives the communicator while a Work needs it
  std::shared_ptr<Job> job_;
};

ChunkedAllReduces::~ChunkedAllReduces() {
  try {
    if (std::uncaught_exceptions() == 0) flush();  // unwinding from a failure: say it, do not wait
  } catch (...) {
  }
}

std::unique_ptr<Work> ChunkedAllReduces::start(char* data, int64_t count, MPI_Datatype type, int64_t element_bytes,
                                               MPI_Op op, std::string what, std::function<void()> on_complete) {
  auto job = std::make_shared<Job>(Job{data, count, type, element_bytes, op, std::move(what), std::move(on_complete)});
  jobs_.push_back(job);
  try {
    advance();  // the first chunk starts now when nothing is ahead of it
  } catch (...) {
    // Nothing of it started (a chunk ahead failed, or its own post): no Work will wait for it.
    if (job->posted == 0) std::erase(jobs_, job);
    throw;
  }
  return std::make_unique<ChunkWork>(shared_from_this(), std::move(job));
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
