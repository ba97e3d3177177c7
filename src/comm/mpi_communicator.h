// The Communicator on MPI (OpenMPI from Debian): non-blocking collectives (MPI_Iallreduce,
// MPI_Ireduce_scatter_block, MPI_Iallgather, MPI_Ibcast, MPI_Ialltoall, MPI_Ialltoallv) and
// MPI_Isend/Irecv.
// Errors return (MPI_ERRORS_RETURN) and become trident::Error naming the rank, the operation
// and MPI's message. A rank that dies or stops taking part ends the job with messages naming
// it and the operation (Note [Distributed failures] in mpi_runtime.cc).
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace trident::comm {

class MpiRuntime {
 public:
  // MPI_Init_thread (MPI_THREAD_FUNNELED: only the main thread calls MPI) if not done yet;
  // MPI_Finalize runs at exit. Safe to call more than once. TRIDENT_COMM_PROGRESS_THREAD=1:
  // MPI_THREAD_MULTIPLE and a thread driving MPI's progress (Note [The progress thread]).
  static void init(int* argc = nullptr, char*** argv = nullptr);
  static bool initialized();
  // The communicator of every process of the job (MPI_COMM_WORLD).
  static std::unique_ptr<Communicator> world();
  // Whether this process was started by mpirun (its environment says so), so that a
  // program can run alone without touching MPI.
  static bool launched_by_mpirun();
  // This process's rank in the job from the launcher's environment (0 when not launched).
  static int launcher_rank();
  // How long wait() lets one operation take before it names it and ends the job (default
  // 300 s; the environment variable TRIDENT_COMM_TIMEOUT_S overrides it at init). Note
  // [Distributed failures] in mpi_runtime.cc.
  static void set_timeout(double seconds);
  static double timeout();
  // For signal handlers (no allocation, no locks): writes "trident (rank R): <what> while
  // <the operation this rank was last in>" to stderr, so that a rank the launcher ends
  // leaves last words (Note [Distributed failures]). Writes nothing outside an MPI job.
  static void write_last_words(const char* what);
  // For tests on one machine: communicators created from now on take world ranks
  // [k x ranks, (k + 1) x ranks) to share host k, whatever MPI says (0: MPI's layout again).
  static void pretend_ranks_per_host(int ranks);
  // Ends every process of the job (MPI_Abort): a rank that fails must not leave the others
  // waiting in a collective.
  [[noreturn]] static void abort(int code);
};

}  // namespace trident::comm
