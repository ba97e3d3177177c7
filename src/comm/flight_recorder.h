// The flight recorder: the last kFlightRecords communication operations this process started,
// each with its communicator, sequence number on that communicator, operation, bytes, start
// time and whether it completed (PyTorch's NCCL flight recorder, in small), for MPI's and
// NCCL's communicators alike. When a collective times out (comm/mpi_communicator.cc,
// comm/nccl_communicator.cc) or the hang rule fires (train/run_monitor.cc), every
// rank prints its records and writes them to out_dir, so the faulty rank is the one whose
// sequence numbers stop short of the others' (Note [Reading a flight record]).
//
// Thread-safe (a mutex per call, uncontended: the training thread records, a watchdog or the
// timeout path reads). Process-wide: one per process, like the communicators' MPI runtime.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace trident::comm {

// Note [Reading a flight record]
// Communicators are numbered in the order this process created them (0: the world); every
// rank creates them in the same order (splits are collective), so communicator k plays the
// same part on every rank. Sequence numbers count the operations started on a communicator,
// from 1, so the n-th collective has the same number on every rank that takes part. A rank
// stuck in collective n of communicator k shows it "in flight"; a rank that never reached it
// shows at most n - 1 there: that rank is the one to look at, and its own last record (or
// none, when it hangs outside communication) says what it did last.
inline constexpr int kFlightRecords = 64;

struct FlightRecord {
  int comm = 0;            // the communicator's number
  int comm_size = 0;       // its ranks
  int64_t seq = 0;         // the operation's number on that communicator (from 1)
  std::string op;          // "all_reduce", "send to rank 3", ...
  int64_t bytes = 0;       // this rank's input
  double started_s = 0.0;  // seconds since the recorder's creation
  bool completed = false;
};

class FlightRecorder {
 public:
  // A number for a new communicator.
  int new_communicator();
  // Records an operation started on communicator `comm` and returns its sequence number.
  int64_t started(int comm, int comm_size, const std::string& op, int64_t bytes);
  void completed(int comm, int64_t seq);
  std::deque<FlightRecord> records() const;
  // The records as a JSON array, oldest first.
  std::string json() const;
  // The newest `n` records as lines for people ("comm 0 (2 ranks) #41 all_reduce 4096 B at
  // 12.345 s: in flight").
  std::string text(int n) const;
  // Where the timeout path writes the records (JSON), set by the trainer: "" = nowhere.
  void set_dump_path(const std::string& path);
  std::string dump_path() const;
  // The same, as the trainer sets it: dir/flight_rank<rank>.json, where every rank of the job
  // writes its own, so that a rank whose wait timed out can read the others' (Note [Naming the
  // rank at a timeout] in comm/mpi_communicator.cc).
  void set_dump_dir(const std::string& dir, int rank);
  // dir/flight_rank<rank>.json of set_dump_dir for any rank; "" when no directory is set.
  std::string dump_path_of(int rank) const;
  // Writes json() to dump_path() (a temporary name, then renamed: a reader sees all or
  // nothing); false when unset or unwritable.
  bool write_dump() const;
  // The records of a dump as json() wrote them; nullopt for anything else.
  static std::optional<std::vector<FlightRecord>> parse(const std::string& json_text);
  // A test's fault (train/fault_injection.h; TRIDENT_TEST_SLEEP_COLLECTIVE, Note [Test hooks]
  // in tests/support/env_fault_injector.h):
  // completed(comm, seq) first sleeps `seconds` (outside the lock, so dumps can still be
  // read), as a rank stuck inside that operation would: it stays "in flight" here while the
  // other ranks, whose part of it finished, go on.
  void sleep_inside(int comm, int64_t seq, double seconds);

 private:
  mutable std::mutex mu_;
  std::deque<FlightRecord> records_;
  std::deque<int64_t> next_seq_;  // per communicator
  std::string dump_path_;
  std::string dump_dir_;
  int sleep_comm_ = -1;
  int64_t sleep_seq_ = 0;
  double sleep_s_ = 0.0;
};

FlightRecorder& flight_recorder();

}  // namespace trident::comm
