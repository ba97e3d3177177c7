// `trident calibrate`: measures this machine for the planner and writes a cluster file
// (planner/cluster.h) with what it found: the GEMM rate of the run's engine and dtype at the
// model's shapes (as the peak, efficiency 1), the attention kernel's rate as a fraction of it,
// the memory-bound ops' bandwidth, and, across the ranks of mpirun, the all-reduce's bandwidth
// and latency (a two-size fit of the ring's alpha-beta cost). Threads: train.threads.
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.h"
#include "planner/cluster.h"
#include "train/train_config.h"

namespace trident::planner {

struct CalibrationOptions {
  double seconds_per_measure = 0.2;  // each rate is the fastest of repeats over about this long
};

// Collective when `comm` has more than one rank (every rank measures; rank 0's result counts).
Cluster calibrate(const train::TrainConfig& cfg, const std::shared_ptr<comm::Communicator>& comm,
                  const CalibrationOptions& options = {});

}  // namespace trident::planner
