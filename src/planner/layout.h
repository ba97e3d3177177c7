// One way to run a training step on a number of ranks: the parallel degrees, ZeRO stage,
// activation checkpointing and the micro-batching of the step's global batch, as the planner
// enumerates them (planner/search.h) and as config overrides that run it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/train_config.h"

namespace trident::planner {

// Note [The planner's ep axis]
// A mixture of experts' layouts add expert parallelism (parallel.ep), the mesh's ep axis
// (parallel/mesh.h): `dp` is the mesh's dp axis (the ranks holding the same experts, what an
// expert's gradient is averaged and ZeRO-sharded over), and a dense parameter is replicated
// over dp x ep, which also split each step's sequences. ranks = dp x ep x tp x pp. A dense
// model's layouts have ep = 1, and str() writes "ep" only when it is above 1, so their names
// stay what they were.
struct Layout {
  int64_t dp = 1, tp = 1, pp = 1;
  int64_t ep = 1;  // expert-parallel ranks (parallel.ep)
  int64_t virtual_stages = 1;  // > 1: the interleaved schedule
  int64_t zero_stage = 0;
  std::string checkpointing = "none";  // model.activation_checkpointing
  int64_t micro_batch = 1;  // sequences per micro-batch on one data-parallel rank (b)
  int64_t accum = 1;        // micro-batches per step (m): data.grad_accum_steps, the pipeline's micro-batches
  bool offload = false;     // ZeRO-Offload: masters and AdamW state in host memory
  // With offload: that state on the NVMe tier instead (parallel.offload_optimizer_device =
  // "nvme", ZeRO-Infinity's optimizer tier: planner/nvme_tier.h), staged through host memory.
  bool nvme = false;
  bool sequence_parallel = false;

  int64_t ranks() const { return dp * ep * tp * pp; }
  // The ranks a dense parameter is replicated over, each with its own sequences (dp x ep).
  int64_t data_parallel() const { return dp * ep; }
  // Sequences per optimizer step over all ranks.
  int64_t global_batch() const { return micro_batch * data_parallel() * accum; }
  std::string pipeline_schedule() const;
  // The --section.key=value overrides that run it (every [parallel] key the planner chooses,
  // data.batch_size, data.grad_accum_steps, model.activation_checkpointing).
  std::vector<std::string> overrides() const;
  // Applies it to a config (what the overrides do).
  void apply(train::TrainConfig& cfg) const;
  // Its [parallel] section on top of `base` (the run's other parallel.* keys).
  parallel::ParallelOptions parallel_options(const parallel::ParallelOptions& base = {}) const;
  // "dp2 tp1 pp1 zero1 ckpt=none b4 m1"; "dp1 ep2 tp1 pp1 ..." under expert parallelism;
  // "zero1+offload" with offload, "zero1+nvme" with the tier.
  std::string str() const;
  bool operator==(const Layout&) const = default;
};

// The layout a config asks for on `ranks` ranks (dp = ranks / (ep x tp x pp)).
Layout layout_of(const train::TrainConfig& cfg, int64_t ranks);

// Whether the trainer runs `l` for a model of `model` with sequences of `seq_len` tokens: the
// trainer's own check (parallel::check_layout), so the planner never lists a layout the trainer
// refuses. When not, `why` (if given) gets the trainer's message.
bool trainer_accepts(const models::ModelConfig& model, int64_t seq_len, const Layout& l, std::string* why = nullptr);

}  // namespace trident::planner
