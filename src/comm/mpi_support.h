// Pieces of the MPI backend shared by its files (comm/mpi_communicator.cc, comm/mpi_runtime.cc,
// comm/mpi_schedule_work.cc); not for use outside src/comm.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace trident::comm::mpi_support {

// MPI's message for an error code.
std::string mpi_error(int code);
// The MPI datatype of a dtype (bf16 and f16 travel as 16-bit words).
MPI_Datatype mpi_type(DType d);
// Calls test() until it says done; past the communication timeout, names `what` (and what
// `stalled_on` says it waits for), prints the flight record and ends the job (Note
// [Distributed failures] in comm/mpi_runtime.cc).
// TRIDENT_COMM_TIMEOUT_S's value: seconds > 0; anything else (empty, "5s", "0", "abc") throws
// naming the variable and the value.
double timeout_from_env(const char* value);
// TRIDENT_COMM_PROGRESS_THREAD's value (null: unset): "0" or "1", else throws naming it.
bool progress_thread_from_env(const char* value);
// MPI's int counts and displacements for one side of all_to_all_v (elements per rank, each
// rank's block after the one before). A count or displacement past MPI's int throws naming
// `where` (the rank and the operation), the side ("send" or "recv"), the peer and the value.
struct MpiCounts {
  std::vector<int> counts, displs;
};
MpiCounts mpi_counts(const std::vector<int64_t>& counts, const std::string& where, const char* side);
void poll_until_done(const std::function<bool()>& test, const std::string& what,
                     const std::function<std::string()>& stalled_on);
// What this rank is doing, for its last words (Note [Distributed failures]): "`verb` `what`".
void note_op(const char* verb, const std::string& what);
// The collectives' timeout (MpiRuntime::set_timeout, TRIDENT_COMM_TIMEOUT_S), and this rank's
// place in MPI_COMM_WORLD (-1 and 1 before MpiRuntime::init).
double timeout_seconds();
int world_rank();
int world_size();

}  // namespace trident::comm::mpi_support
