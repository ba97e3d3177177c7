#include "comm/mpi_schedule_work.h"

#include <algorithm>

#include "comm/flight_recorder.h"
#include "comm/mpi_chunked_all_reduce.h"
#include "comm/mpi_support.h"
#include "core/check.h"

namespace trident::comm {

using mpi_support::mpi_error;
using mpi_support::mpi_type;

ScheduleWork::ScheduleWork(MPI_Comm comm, int tag, RingSchedule schedule, char* buffer, DType dtype, ReduceOp op,
                           std::function<void()> finish, std::string what, const HostLayout& layout, int my_rank,
                           int flight_comm, int64_t seq, std::vector<ScheduleWork*>& inflight)
    : comm_(comm), tag_(tag), schedule_(std::move(schedule)), buffer_(buffer), dtype_(dtype), op_(op),
      finish_(std::move(finish)), what_(std::move(what)), layout_(layout), rank_(my_rank), flight_comm_(flight_comm),
      seq_(seq), scratch_(static_cast<size_t>(schedule_.max_reduce_count) * element_size(dtype)), inflight_(inflight) {
  inflight_.push_back(this);
  poll();  // the first step starts now
}

ScheduleWork::~ScheduleWork() {
  if (!finished_) {
    try {
      wait();
    } catch (...) {  // a destructor must not throw; the failure was the caller's to wait for
    }
  }
  const auto it = std::find(inflight_.begin(), inflight_.end(), this);
  if (it != inflight_.end()) inflight_.erase(it);
}

void ScheduleWork::wait() {
  if (finished_) return;
  mpi_support::poll_until_done(
      [this] {
        const std::vector<ScheduleWork*> others = inflight_;  // polling may finish (and remove) some
        for (ScheduleWork* w : others)
          if (w != this) w->poll();
        return poll();
      },
      what_, [this] { return stalled_on(); });
}

bool ScheduleWork::test() {
  ChunkedAllReduces::advance_all();  // Note [Chunked all-reduce on one host]
  return poll();
}

bool ScheduleWork::poll() {
  const size_t es = element_size(dtype_);
  while (!finished_) {
    if (step_ == schedule_.steps.size()) {
      if (finish_) finish_();
      finished_ = true;
      inflight_.erase(std::find(inflight_.begin(), inflight_.end(), this));
      flight_recorder().completed(flight_comm_, seq_);
      break;
    }
    const RingStep& st = schedule_.steps[step_];
    if (!posted_) {
      requests_[0] = requests_[1] = MPI_REQUEST_NULL;
      if (st.recv_from >= 0) {
        char* to = st.reduce ? scratch_.data() : buffer_ + static_cast<size_t>(st.recv.offset) * es;
        check(MPI_Irecv(to, count(st.recv), mpi_type(dtype_), st.recv_from, tag_, comm_, &requests_[0]), "receive");
      }
      if (st.send_to >= 0)
        check(MPI_Isend(buffer_ + static_cast<size_t>(st.send.offset) * es, count(st.send), mpi_type(dtype_),
                        st.send_to, tag_, comm_, &requests_[1]),
              "send");
      posted_ = true;
    }
    int done = 0;
    check(MPI_Testall(2, requests_, &done, MPI_STATUSES_IGNORE), "step");
    if (!done) return false;
    if (st.reduce && st.recv_from >= 0)
      reduce_into(buffer_ + static_cast<size_t>(st.recv.offset) * es, scratch_.data(), st.recv.count, dtype_, op_);
    ++step_;
    posted_ = false;
  }
  return true;
}

std::string ScheduleWork::stalled_on() const {
  if (step_ >= schedule_.steps.size()) return "";
  const RingStep& st = schedule_.steps[step_];
  int flag = 0;
  const bool receiving = st.recv_from >= 0 && requests_[0] != MPI_REQUEST_NULL &&
                         MPI_Request_get_status(requests_[0], &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && !flag;
  const int peer = receiving || st.send_to < 0 ? st.recv_from : st.send_to;
  const auto host = [&](int r) { return layout_.names[static_cast<size_t>(layout_.host_of[static_cast<size_t>(r)])]; };
  return "step " + std::to_string(step_ + 1) + " of " + std::to_string(schedule_.steps.size()) + " (" + st.phase +
         ") waits to " + (receiving || st.send_to < 0 ? "receive from" : "send to") + " rank " + std::to_string(peer) +
         " on host " + host(peer) + (host(peer) == host(rank_) ? " (this host)" : "") + "; this rank is on " +
         host(rank_) + "; the communicator spans " + layout_.str();
}

void ScheduleWork::check(int rc, const char* what) const {
  TRI_CHECK_KIND(ErrorKind::kDistributed, rc == MPI_SUCCESS, what_, ": ", what, " of step ", step_ + 1, " failed: ",
                 mpi_error(rc));
}

}  // namespace trident::comm
