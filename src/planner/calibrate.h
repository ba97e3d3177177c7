// `trident calibrate`: measures this machine for the planner and writes a cluster file
// (planner/cluster.h) with what it found: the GEMM rate of the run's engine and dtype at the
// model's shapes (as the peak, efficiency 1), the attention kernel's rate as a fraction of it,
// the memory-bound ops' bandwidth, and, across the ranks of mpirun, the all-reduce's bandwidth
// and latency (a two-size fit of the ring's alpha-beta cost), and with parallel.nvme_path the
// NVMe tier's disk there (Note [Calibrating the disk]). Threads: train.threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "planner/cluster.h"
#include "train/train_config.h"

namespace trident::planner {

struct CalibrationOptions {
  double seconds_per_measure = 0.2;  // each rate is the median of calls over about this long (a GEMM shape's a fifth)
  int rounds = 5;  // the rates' calls, in turns (Note [Rates timed in turns] in calibration_timer.cc)
  int64_t disk_bytes = int64_t{512} << 20;  // written and read back per rank, with parallel.nvme_path
};

// The NVMe tier's disk under p.nvme_path, through the tier's own file (Note [Calibrating the
// disk] in calibrate.cc): about `bytes` per rank written and read back, every rank of `comm`
// at once; GB/s of all of them together. Collective when `comm` has more than one rank.
struct DiskRates {
  double read_gbs = 0.0, write_gbs = 0.0;
};
DiskRates calibrate_disk(const parallel::ParallelOptions& p, const std::shared_ptr<comm::Communicator>& comm,
                         int64_t bytes);

// Collective when `comm` has more than one rank (every rank measures; rank 0's result counts).
Cluster calibrate(const train::TrainConfig& cfg, const std::shared_ptr<comm::Communicator>& comm,
                  const CalibrationOptions& options = {});

}  // namespace trident::planner
