// The [parallel] section: how a run splits over the ranks of mpirun (the mesh's tensor and
// pipeline degrees, ZeRO, buckets, offload). parallel/parallelize.h applies it.
#pragma once

#include <cstdint>
#include <string>

#include "core/options.h"

namespace trident::parallel {

struct ParallelOptions {
  int64_t tp = 1;            // tensor-parallel degree (parallel/tensor_parallel.h); dp = ranks / tp
  bool sequence_parallel = false;  // with tp > 1: activations outside the tp layers split along T
  int64_t pp = 1;                  // pipeline stages (parallel/pipeline.h)
  int64_t ep = 1;                  // expert-parallel degree: ranks holding other experts (expert_parallel.h)
  int64_t virtual_stages = 1;      // model chunks per pipeline rank (the interleaved schedule)
  std::string pipeline_schedule = "1f1b";
  std::string pipeline_layers;     // blocks per chunk, "3,1,..."; empty: balanced
  int64_t zero_stage = 0;    // 0: data parallel (replicated optimizer state)
  double bucket_mb = 25.0;   // gradient bucket size for the all-reduces (MiB)
  bool offload_optimizer = false;  // ZeRO-Offload: fp32 masters and AdamW state in host memory
  // ZeRO-Infinity: with offload_optimizer, "nvme" keeps that state in files under nvme_path
  // instead (parallel/zero/state_store.h), nvme_buffer_count buckets of it in host memory.
  std::string offload_optimizer_device = "cpu";
  // ZeRO-Infinity: with zero_stage 3, "nvme" keeps this rank's parameter shard in a file under
  // nvme_path (parallel/zero/parameter_store.h), read ahead nvme_prefetch_depth parts.
  std::string offload_param = "none";
  std::string nvme_path;
  int64_t nvme_buffer_count = 4;
  double nvme_buffer_mb = 32;  // each staging buffer's masters, m and v: MiB each
  // At least a unit's requests (2 x 3 x nvme_buffer_mb of 1 MiB, read and written): requests
  // refill only when the optimizer calls in, so a shallower queue idles the disk through AdamW.
  int64_t nvme_queue_depth = 128;
  // See Note [The parameter tier's read-ahead depth] in parallel_options.cc.
  int64_t nvme_prefetch_depth = 2;
  std::string hierarchical = "auto";  // collectives over several hosts (comm/communicator.h)
  double intra_host_gbps = 0;         // link bandwidths for hierarchical = auto; 0: measured
  double inter_host_gbps = 0;
  // Compressed gradient synchronization (parallel/grad_compression.h): none, bf16, powersgd,
  // onebit_adam; with the settings of PowerSGD and 1-bit Adam.
  std::string grad_compression = "none";
  int64_t powersgd_rank = 4;
  int64_t powersgd_start_step = 100;
  int64_t onebit_warmup_steps = 100;
  // Not DeepSpeed's (0, false), which diverged on GPT-2's tied embedding (Notes [1-bit Adam's
  // block scales] and [1-bit Adam's bounded update] in onebit_adam.h).
  int64_t onebit_block = 256;
  bool onebit_bound_update = true;
  bool auto_layout = false;        // "auto": `trident train` runs the planner's best layout (apps/plan.cc)
  std::string auto_cluster;        // the cluster file the planner plans it with ("": this machine)
  static const OptionTable<ParallelOptions>& table();
};

}  // namespace trident::parallel
