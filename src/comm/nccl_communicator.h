// The Communicator on NCCL, between GPUs (issue #7): every operation runs on the
// communicator's own CUDA stream after the compute stream's queued work (an event), so it
// overlaps the kernels queued after it; wait() makes the compute stream wait for it and polls
// it from the host with the job's timeout, so a dead or stuck peer ends this rank with a message
// naming the rank and the operation (ncclCommAbort), never a silent hang.
//
// Tensors are contiguous CUDA tensors. Reductions: f32, f64, bf16, f16, i32, i64 (NCCL sums
// bf16/f16 in their own precision per step). Point-to-point messages between two ranks match in
// the order they are posted (NCCL has no tags: `tag` is checked to be non-negative and
// otherwise unused). Built with the CUDA backend when CMake finds NCCL (TRIDENT_WITH_NCCL).
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace trident::comm {

class NcclCommunicator;

// Creates an NCCL communicator over the ranks of `bootstrap` (MPI): rank 0 makes the unique
// id and broadcasts it through `bootstrap`; each rank uses GPU (local rank % GPUs on the host;
// the local rank from OMPI_COMM_WORLD_LOCAL_RANK or LOCAL_RANK, else the bootstrap rank).
// Throws naming the rank and NCCL's error.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap);
// A communicator of this process alone on the current GPU (no bootstrap needed).
std::unique_ptr<Communicator> make_nccl_self_communicator();

}  // namespace trident::comm
