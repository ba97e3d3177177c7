// The Communicator on MPI (OpenMPI from Debian): non-blocking collectives (MPI_Iallreduce,
// MPI_Ireduce_scatter_block, MPI_Iallgather, MPI_Ibcast, MPI_Ialltoall) and MPI_Isend/Irecv.
// Errors return (MPI_ERRORS_RETURN) and become trident::Error naming the rank, the operation
// and MPI's message.
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace trident::comm {

class MpiRuntime {
 public:
  // MPI_Init_thread (MPI_THREAD_FUNNELED: only the main thread calls MPI) if not done yet;
  // MPI_Finalize runs at exit. Safe to call more than once.
  static void init(int* argc = nullptr, char*** argv = nullptr);
  static bool initialized();
  // The communicator of every process of the job (MPI_COMM_WORLD).
  static std::unique_ptr<Communicator> world();
};

}  // namespace trident::comm
