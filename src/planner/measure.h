// Measuring a layout: the trainer runs a config on random tokens for a few steps and reports
// the allocator's peak bytes per category (core/allocator.h) and the step time, the
// quantities the planner predicts (planner/memory_model.h, planner/time_model.h). The tests
// and bench/plan_accuracy_bench compare the two; calibration uses the times.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/allocator.h"
#include "core/status.h"
#include "train/train_config.h"

namespace trident::planner {

struct Measurement {
  // The allocator's peak bytes in use per MemoryCategory during the measured steps (after
  // the warm-up ones: the optimizer's state exists by then), the largest over the ranks.
  std::array<int64_t, kNumMemoryCategories> peak_bytes{};
  // Each rank's, by world rank (one entry without a communicator).
  std::vector<std::array<int64_t, kNumMemoryCategories>> rank_peak_bytes;
  // On a device: the host's allocators' (pageable and pinned together), the largest over the
  // ranks, where ZeRO-Offload keeps its state (MemoryEstimate::host_peak_bytes). The device's
  // are peak_bytes then.
  std::array<int64_t, kNumMemoryCategories> host_peak_bytes{};
  double step_s = 0.0;      // the fastest measured step's wall time on its slowest rank (Note [Measured step time])
  double step_cpu_s = 0.0;  // that step's process CPU time, the largest over the ranks
  double comm_wait_s = 0.0; // that step's time waiting for communication (train::StepMetrics), the largest over the ranks
  // The NVMe tier's bytes [read, written] in the last measured step, by world rank: what each
  // rank's train::StepMetrics::nvme counts (metrics.jsonl's "nvme" is rank 0's); zeros without the tier.
  std::vector<std::array<int64_t, 2>> rank_disk_bytes;
};

// Runs `cfg` over `comm` (null: one process without a communicator) on a random token file
// it writes under `scratch_dir`: `warmup` steps, then `steps` measured ones. The config's
// data files, evaluation and checkpoints are replaced (nothing is written but the tokens and
// the run's metrics). Collective when `comm` is given. `device`: the model's, as
// Trainer::create takes it (the tests' emulated device); by default the config's.
StatusOr<Measurement> measure_layout(train::TrainConfig cfg, std::shared_ptr<comm::Communicator> comm,
                                     const std::string& scratch_dir, int64_t warmup = 1, int64_t steps = 1,
                                     std::optional<Device> device = std::nullopt);

}  // namespace trident::planner
