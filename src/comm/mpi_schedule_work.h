// The Work of a ring schedule (comm/ring_schedule.h) on MPI: each step's MPI_Isend/Irecv on
// the communicator's duplicate with the operation's tag, received blocks reduced into the
// buffer, a finishing copy at the end. A stalled step ends the job past the timeout, naming
// the step, the peer rank and its host (Note [Hierarchical collectives] in
// comm/mpi_communicator.cc).
#pragma once

#include <mpi.h>

#include <functional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/ring_schedule.h"

namespace trident::comm {

class ScheduleWork final : public Work {
 public:
  // Starts the first step. `buffer` (and what `finish` touches) must live until the work
  // completes; `layout` and `inflight` are the communicator's, which outlives its works.
  // `inflight`: the communicator's schedules not yet finished, this one joins them; waiting on
  // one advances them all, so that the buckets of a step pipeline (one in its inter-host
  // phase while the next is in its intra-host one) instead of queueing behind each other.
  ScheduleWork(MPI_Comm comm, int tag, RingSchedule schedule, char* buffer, DType dtype, ReduceOp op,
               std::function<void()> finish, std::string what, const HostLayout& layout, int my_rank, int flight_comm,
               int64_t seq, std::vector<ScheduleWork*>& inflight);
  ~ScheduleWork() override;
  void wait() override;
  bool test() override;

 private:
  bool poll();
  std::string stalled_on() const;
  int count(const Span& s) const { return static_cast<int>(s.count); }
  void check(int rc, const char* what) const;

  MPI_Comm comm_;
  int tag_;
  RingSchedule schedule_;
  char* buffer_;
  DType dtype_;
  ReduceOp op_;
  std::function<void()> finish_;
  std::string what_;
  const HostLayout& layout_;
  int rank_;
  int flight_comm_;
  int64_t seq_;
  std::vector<char> scratch_;
  size_t step_ = 0;
  bool posted_ = false, finished_ = false;
  MPI_Request requests_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  std::vector<ScheduleWork*>& inflight_;
};

}  // namespace trident::comm
