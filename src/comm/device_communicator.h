// Communicators for tensors on devices.
//
// with_staging: a Communicator that accepts tensors on any device, over an engine that reads
// only one kind of memory: MPI without CUDA awareness reads host memory, NCCL GPU memory. A
// tensor that is not on the engine's device is copied to a same-sized stand-in there when the
// operation starts, and the result is copied back when it is waited on (the stand-in lives as
// long as the Work). Tensors already on the engine's device pass straight through.
//
// It lets every parallel strategy keep its buffers where its parameters live: data parallel
// and ZeRO on a device run over MPI (the emulated device in CI, a GPU without NCCL), and the
// few host scalars they exchange (gradient norms, losses) run over NCCL.
#pragma once

#include <memory>

#include "comm/communicator.h"
#include "core/device.h"

namespace trident::comm {

// `engine` operates on tensors of `native` only; the result accepts tensors anywhere.
// Operations are counted once, by the result (stats() as any communicator's).
std::unique_ptr<Communicator> with_staging(std::shared_ptr<Communicator> engine, Device native);

// The communicator for the collectives of a job whose tensors live on `device`, over the ranks
// of `world` (MPI): NCCL on CUDA when the build has it (which also makes this process use the
// GPU of its local rank), else `world` staging through host memory. Tensors on other devices
// are staged either way.
std::unique_ptr<Communicator> communicator_for(std::shared_ptr<Communicator> world, Device device);

}  // namespace trident::comm
